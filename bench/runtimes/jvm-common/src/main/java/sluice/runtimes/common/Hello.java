package sluice.runtimes.common;

import java.nio.charset.StandardCharsets;

/**
 * The hello world of seeds/001. No `sluice serve` service answers a greeting,
 * so the hello world is the smallest existing fixed body: `sluice serve static
 * --size 12` answers every GET with these 12 bytes as text/plain.
 */
public final class Hello {
    public static final String CONTENT_TYPE = "text/plain";

    private static final byte[] BODY = "abcdefghijkl".getBytes(StandardCharsets.US_ASCII);

    private Hello() {}

    /** A fresh copy: frameworks may keep the array they are given. */
    public static byte[] body() {
        return BODY.clone();
    }
}
