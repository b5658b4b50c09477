package sluice.runtimes.common;

import java.util.List;

/** A pet of specs/petstore.yaml; Jackson writes the fields in this order. */
public record Pet(long id, String name, String tag) {
    /**
     * `GET /v1/pets`: serialised, exactly
     * [{"id":1,"name":"catten","tag":"cat"},{"id":2,"name":"doggy","tag":"dog"}]
     */
    public static final List<Pet> ALL = List.of(new Pet(1, "catten", "cat"), new Pet(2, "doggy", "dog"));
}
