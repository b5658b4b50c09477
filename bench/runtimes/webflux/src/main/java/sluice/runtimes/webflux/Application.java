package sluice.runtimes.webflux;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/** Spring WebFlux on Netty, with the controllers of spring-common and a non-blocking passthrough. */
@SpringBootApplication(scanBasePackages = "sluice.runtimes")
public class Application {
    public static void main(String[] args) {
        SpringApplication.run(Application.class, args);
    }
}
