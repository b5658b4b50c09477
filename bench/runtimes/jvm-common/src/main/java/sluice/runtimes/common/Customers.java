package sluice.runtimes.common;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The customers API of seeds/004, answering as `sluice serve customers`
 * (crates/backends/src/customers.rs): GET lists the 10 newest, newest first
 * (seeded with ids 1 to 10); POST registers, 201 with Location, 409 on a
 * taken id, 400 naming each invalid field. One registry per process.
 */
public final class Customers {
    /** Registered customers kept; past it the oldest are forgotten, as in sluice. */
    public static final int CAPACITY = 1_000_000;

    private static final int LISTED = 10;
    private static final int MAX_TEXT_LEN = 256;
    private static final BigInteger MAX_ID = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

    private final Map<BigInteger, Customer> byId = new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<BigInteger, Customer> eldest) {
            return size() > CAPACITY;
        }
    };
    /** The newest LISTED, newest first: replaced on each registration, read without a lock. */
    private volatile List<Customer> listing = List.of();

    public Customers() {
        for (int id = 1; id <= LISTED; id++) {
            insert(new Customer(BigInteger.valueOf(id), "Customer " + id, "customer" + id + "@example.com"));
        }
    }

    public List<Customer> listing() {
        return listing;
    }

    public Reply list() {
        return Reply.json(200, listing);
    }

    public Reply register(String contentType, byte[] body) {
        Reply refused = Json.requireJson(contentType);
        if (refused != null) {
            return refused;
        }
        JsonNode value;
        try {
            value = Json.parse(body);
        } catch (IOException malformed) {
            return Json.malformed(malformed);
        }
        List<Problem.Violation> errors = new ArrayList<>();
        Customer customer = validate(value, errors);
        if (customer == null) {
            return Problem.of(400, "invalid customer").withErrors(errors).reply();
        }
        if (!insert(customer)) {
            return Problem.of(409, "a customer with id " + customer.id() + " is already registered").reply();
        }
        return new Reply(201, Reply.APPLICATION_JSON, customer, "/customers/" + customer.id());
    }

    /** Adds a customer unless its id is taken; returns whether it was added. */
    private synchronized boolean insert(Customer customer) {
        if (byId.putIfAbsent(customer.id(), customer) != null) {
            return false;
        }
        List<Customer> newest = new ArrayList<>(LISTED);
        newest.add(customer);
        newest.addAll(listing.subList(0, Math.min(listing.size(), LISTED - 1)));
        listing = List.copyOf(newest);
        return true;
    }

    /** id (integer >= 1), name (1 to 256 characters) and email (with an @) are required. */
    static Customer validate(JsonNode value, List<Problem.Violation> errors) {
        if (!value.isObject()) {
            errors.add(new Problem.Violation("", "must be a JSON object"));
            return null;
        }
        JsonNode idNode = value.get("id");
        BigInteger id = null;
        if (idNode == null) {
            errors.add(new Problem.Violation("/id", "is required"));
        } else if (idNode.isIntegralNumber()
                && idNode.bigIntegerValue().signum() > 0
                && idNode.bigIntegerValue().compareTo(MAX_ID) <= 0) {
            id = idNode.bigIntegerValue();
        } else {
            errors.add(new Problem.Violation("/id", "must be an integer >= 1"));
        }
        String name = text(value, "name", text -> true, errors);
        String email = text(value, "email", Customers::looksLikeEmail, errors);
        return errors.isEmpty() ? new Customer(id, name, email) : null;
    }

    private static String text(JsonNode object, String field, Predicate<String> valid, List<Problem.Violation> errors) {
        JsonNode node = object.get(field);
        if (node == null) {
            errors.add(new Problem.Violation("/" + field, "is required"));
            return null;
        }
        if (node.isTextual()) {
            String text = node.textValue();
            int chars = text.codePointCount(0, text.length());
            if (chars >= 1 && chars <= MAX_TEXT_LEN && valid.test(text)) {
                return text;
            }
        }
        errors.add(new Problem.Violation(
                "/" + field, "must be a valid " + field + " of 1 to " + MAX_TEXT_LEN + " characters"));
        return null;
    }

    /** Something before and after the first @. */
    private static boolean looksLikeEmail(String email) {
        int at = email.indexOf('@');
        return at > 0 && at < email.length() - 1;
    }
}
