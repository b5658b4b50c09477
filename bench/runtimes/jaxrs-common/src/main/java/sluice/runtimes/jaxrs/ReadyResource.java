package sluice.runtimes.jaxrs;

import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;

/**
 * `GET /ready`: 200 once the app is deployed (Payara Micro accepts
 * connections, and answers 404, seconds before). `sluice bench` waits on it
 * instead of `GET /customers`, so that a cold row of seeds/004 measures the
 * JVM's first customers request, not its second.
 */
@Path("/ready")
public class ReadyResource {
    @GET
    @Produces("text/plain")
    public String ready() {
        return "ready";
    }
}
