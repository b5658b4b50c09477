package sluice.runtimes.webflux;

import io.netty.channel.ChannelOption;
import java.util.concurrent.TimeoutException;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.reactive.ReactorClientHttpConnector;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.reactive.function.client.WebClient;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;
import sluice.runtimes.common.Passthrough;
import sluice.runtimes.common.Reply;
import sluice.runtimes.spring.Replies;

/**
 * seeds/003's non-blocking side: WebClient on the Netty event loop; no
 * thread waits for the downstream.
 */
@RestController
public class PassthroughController {
    /**
     * Reactor Netty 1.2's default pool is 2 connections per core, at least
     * 16: behind a 300 ms downstream that caps the passthrough near 50
     * requests a second, long before the event loop. seeds/003's WebClient
     * (Boot 2.0) grew its pool on demand.
     */
    private static final int MAX_CONNECTIONS = 10_000;

    private final Passthrough passthrough;
    private final WebClient client;

    public PassthroughController(@Value("${downstream}") String downstream, WebClient.Builder builder) {
        this.passthrough = new Passthrough(downstream);
        ConnectionProvider pool = ConnectionProvider.builder("downstream")
                .maxConnections(MAX_CONNECTIONS)
                .pendingAcquireMaxCount(-1)
                .build();
        HttpClient http = HttpClient.create(pool)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Passthrough.CONNECT_TIMEOUT.toMillis());
        this.client = builder.clientConnector(new ReactorClientHttpConnector(http)).build();
    }

    @PostMapping("/passthrough/message")
    public Mono<ResponseEntity<Object>> message(
            @RequestHeader(value = HttpHeaders.CONTENT_TYPE, required = false) String contentType,
            @RequestBody(required = false) byte[] body) {
        byte[] message = body == null ? new byte[0] : body;
        Reply refused = passthrough.refuse(contentType, message);
        Mono<Reply> reply = refused != null ? Mono.just(refused) : forward(message);
        return reply.map(Replies::entity);
    }

    private Mono<Reply> forward(byte[] message) {
        return client.post()
                .uri(passthrough.target())
                .contentType(MediaType.APPLICATION_JSON)
                .bodyValue(message)
                .exchangeToMono(response -> response.bodyToMono(byte[].class)
                        .defaultIfEmpty(new byte[0])
                        .map(answer -> passthrough.relay(
                                response.statusCode().value(),
                                response.headers().asHttpHeaders().getFirst(HttpHeaders.CONTENT_TYPE),
                                answer)))
                .timeout(Passthrough.TIMEOUT)
                .onErrorResume(TimeoutException.class, slow -> Mono.just(passthrough.timedOut()))
                .onErrorResume(error -> Mono.just(passthrough.failed(error)));
    }
}
