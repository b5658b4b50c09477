package sluice.runtimes.mvc;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/** Spring MVC on Tomcat, with the controllers of spring-common and a blocking passthrough. */
@SpringBootApplication(scanBasePackages = "sluice.runtimes")
public class Application {
    public static void main(String[] args) {
        SpringApplication.run(Application.class, args);
    }
}
