package sluice.runtimes.grizzly;

import java.net.URI;
import org.glassfish.grizzly.http.server.HttpServer;
import org.glassfish.grizzly.http.server.NetworkListener;
import org.glassfish.jersey.grizzly2.httpserver.GrizzlyHttpServerFactory;
import org.glassfish.jersey.jackson.JacksonFeature;
import org.glassfish.jersey.server.ResourceConfig;
import org.glassfish.jersey.server.ServerProperties;
import sluice.runtimes.jaxrs.CustomersResource;
import sluice.runtimes.jaxrs.ReadyResource;

/** `java -jar grizzly.jar --port 8080 [--host 127.0.0.1]`: the customers API on Grizzly. */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = 8080;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--host" -> host = args[i + 1];
                case "--port" -> port = Integer.parseInt(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown flag " + args[i] + "; expected --port or --host");
            }
        }
        ResourceConfig config = new ResourceConfig(CustomersResource.class, ReadyResource.class)
                .register(JacksonFeature.class)
                .property(ServerProperties.LOCATION_HEADER_RELATIVE_URI_RESOLUTION_DISABLED, true);
        HttpServer server = GrizzlyHttpServerFactory.createHttpServer(
                URI.create("http://" + host + ":" + port + "/"), config, false);
        // Keep-alive without a request limit, as every peer in `sluice bench`
        // is run (Grizzly's default closes a connection after 256 requests).
        for (NetworkListener listener : server.getListeners()) {
            listener.getKeepAlive().setMaxRequestsCount(-1);
        }
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        server.start();
        System.out.println("grizzly listening on " + host + ":" + port);
        Thread.currentThread().join();
    }
}
