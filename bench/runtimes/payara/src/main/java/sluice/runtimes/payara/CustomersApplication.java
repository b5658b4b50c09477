package sluice.runtimes.payara;

import jakarta.ws.rs.ApplicationPath;
import jakarta.ws.rs.core.Application;
import java.util.Map;
import java.util.Set;
import org.glassfish.jersey.jackson.JacksonFeature;
import org.glassfish.jersey.server.ServerProperties;
import sluice.runtimes.jaxrs.CustomersResource;
import sluice.runtimes.jaxrs.ReadyResource;

/** The customers API on Payara Micro's Jersey, with Jackson as seeds/004 had it (Payara's default is JSON-B). */
@ApplicationPath("/")
public class CustomersApplication extends Application {
    @Override
    public Set<Class<?>> getClasses() {
        return Set.of(CustomersResource.class, ReadyResource.class, JacksonFeature.class);
    }

    @Override
    public Map<String, Object> getProperties() {
        return Map.of(ServerProperties.LOCATION_HEADER_RELATIVE_URI_RESOLUTION_DISABLED, true);
    }
}
