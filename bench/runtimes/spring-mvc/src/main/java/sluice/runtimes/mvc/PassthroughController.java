package sluice.runtimes.mvc;

import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.JdkClientHttpRequestFactory;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.ResourceAccessException;
import org.springframework.web.client.RestClient;
import sluice.runtimes.common.Passthrough;
import sluice.runtimes.common.Reply;
import sluice.runtimes.spring.Replies;

/**
 * seeds/003's blocking side: the Tomcat worker thread waits on RestClient
 * for the downstream's answer (the seed's RestTemplate, in its Spring 6 form).
 */
@RestController
public class PassthroughController {
    private final Passthrough passthrough;
    private final RestClient client;

    public PassthroughController(@Value("${downstream}") String downstream) {
        this.passthrough = new Passthrough(downstream);
        // HTTP/1.1 like sluice's client: the JDK client would otherwise try an h2c upgrade.
        HttpClient http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Passthrough.CONNECT_TIMEOUT)
                .build();
        JdkClientHttpRequestFactory factory = new JdkClientHttpRequestFactory(http);
        factory.setReadTimeout(Passthrough.TIMEOUT);
        this.client = RestClient.builder().requestFactory(factory).build();
    }

    @PostMapping("/passthrough/message")
    public ResponseEntity<Object> message(
            @RequestHeader(value = HttpHeaders.CONTENT_TYPE, required = false) String contentType,
            @RequestBody(required = false) byte[] body) {
        byte[] message = body == null ? new byte[0] : body;
        Reply refused = passthrough.refuse(contentType, message);
        return Replies.entity(refused != null ? refused : forward(message));
    }

    private Reply forward(byte[] message) {
        try {
            return client.post()
                    .uri(passthrough.target())
                    .contentType(MediaType.APPLICATION_JSON)
                    .body(message)
                    .exchange((request, response) -> passthrough.relay(
                            response.getStatusCode().value(),
                            response.getHeaders().getFirst(HttpHeaders.CONTENT_TYPE),
                            response.getBody().readAllBytes()));
        } catch (ResourceAccessException error) {
            Throwable cause = error.getCause();
            boolean slow = cause instanceof HttpTimeoutException && !(cause instanceof HttpConnectTimeoutException);
            return slow ? passthrough.timedOut() : passthrough.failed(cause == null ? error : cause);
        }
    }
}
