package sluice.runtimes.common;

import java.math.BigInteger;

/** A customer of seeds/004. The id is a JSON integer up to 2^64-1, as in sluice. */
public record Customer(BigInteger id, String name, String email) {}
