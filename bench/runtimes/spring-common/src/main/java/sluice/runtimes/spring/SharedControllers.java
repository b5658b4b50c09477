package sluice.runtimes.spring;

import java.util.List;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import sluice.runtimes.common.Customers;
import sluice.runtimes.common.Hello;
import sluice.runtimes.common.Pet;

/**
 * Hello (seeds/001), the petstore list (seeds/000) and customers (seeds/004),
 * with the bytes `sluice serve` answers. Plain return values: on WebFlux they
 * run on the event loop, which is right for work that never blocks.
 */
@RestController
public class SharedControllers {
    private static final MediaType TEXT_PLAIN = MediaType.parseMediaType(Hello.CONTENT_TYPE);

    private final Customers customers = new Customers();

    @GetMapping("/")
    public ResponseEntity<byte[]> hello() {
        return ResponseEntity.ok().contentType(TEXT_PLAIN).body(Hello.body());
    }

    @GetMapping("/v1/pets")
    public ResponseEntity<List<Pet>> pets() {
        return ResponseEntity.ok().contentType(MediaType.APPLICATION_JSON).body(Pet.ALL);
    }

    @GetMapping("/customers")
    public ResponseEntity<Object> customers() {
        return Replies.entity(customers.list());
    }

    /** The body is read raw so that each invalid field can be named, as sluice does. */
    @PostMapping("/customers")
    public ResponseEntity<Object> register(
            @RequestHeader(value = HttpHeaders.CONTENT_TYPE, required = false) String contentType,
            @RequestBody(required = false) byte[] body) {
        return Replies.entity(customers.register(contentType, body == null ? new byte[0] : body));
    }
}
