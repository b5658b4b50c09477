package sluice.runtimes.jaxrs;

import jakarta.inject.Singleton;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.HeaderParam;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.Response;
import sluice.runtimes.common.Customers;
import sluice.runtimes.common.Reply;

/**
 * seeds/004's customers API with the bytes `sluice serve customers` answers.
 * One instance, so that every request sees the one registry.
 */
@Singleton
@Path("/customers")
public class CustomersResource {
    private final Customers customers = new Customers();

    @GET
    public Response list() {
        return response(customers.list());
    }

    /** The body is read raw so that each invalid field can be named, as sluice does. */
    @POST
    public Response register(@HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType, byte[] body) {
        return response(customers.register(contentType, body == null ? new byte[0] : body));
    }

    /** The Location stays relative: the app turns off Jersey's resolution against the base URI. */
    static Response response(Reply reply) {
        Response.ResponseBuilder builder = Response.status(reply.status())
                .type(reply.contentType())
                .entity(reply.body());
        if (reply.location() != null) {
            builder.header(HttpHeaders.LOCATION, reply.location());
        }
        return builder.build();
    }
}
