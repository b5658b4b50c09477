package sluice.runtimes.spring;

import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import sluice.runtimes.common.Reply;

/** A framework-free reply as a Spring response (MVC and WebFlux alike). */
public final class Replies {
    private Replies() {}

    public static ResponseEntity<Object> entity(Reply reply) {
        ResponseEntity.BodyBuilder builder = ResponseEntity.status(reply.status())
                .contentType(MediaType.parseMediaType(reply.contentType()));
        if (reply.location() != null) {
            builder.header(HttpHeaders.LOCATION, reply.location());
        }
        return builder.body(reply.body());
    }
}
