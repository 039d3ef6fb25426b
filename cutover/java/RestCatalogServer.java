// The sandbox's Iceberg REST catalog server (cutover/local/lake.py), listening on one address only.
//
// iceberg-open-api's RESTCatalogServer (1.10.1) builds its Jetty server with `new Server(port)`: one
// connector on every interface, and no property or CATALOG_ variable chooses another. This program runs
// the same parts (the backend catalog read from the CATALOG_* environment, the adapter that hands out
// storage credentials, the servlet, gzip) behind a connector bound to HOST. Those parts are package-private
// in the jar: they are reached by reflection (the jar is on the class path, in no module).
//
//   java -cp iceberg-open-api-1.10.1.jar RestCatalogServer.java HOST

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.Map;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServer;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.apache.iceberg.util.PropertyUtil;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class RestCatalogServer {
    public static void main(String[] args) throws Exception {
        Object context = hidden(RESTCatalogServer.class, "initializeBackendCatalog").invoke(made(RESTCatalogServer.class));
        @SuppressWarnings("unchecked")
        Map<String, String> config = (Map<String, String>) hidden(context.getClass(), "configuration").invoke(context);
        RESTCatalogAdapter adapter = (RESTCatalogAdapter) made(
                Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter"), context);

        ServletContextHandler handler = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
        handler.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
        handler.insertHandler(new GzipHandler());
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost(args[0]);
        connector.setPort(PropertyUtil.propertyAsInt(config, RESTCatalogServer.REST_PORT, 8181));
        server.addConnector(connector);
        server.setHandler(handler);
        server.start();
        server.join();
    }

    /** A new instance through a constructor that is not public, taking `args`. */
    private static Object made(Class<?> type, Object... args) throws Exception {
        for (Constructor<?> constructor : type.getDeclaredConstructors()) {
            if (constructor.getParameterCount() == args.length) {
                constructor.setAccessible(true);
                return constructor.newInstance(args);
            }
        }
        throw new NoSuchMethodException(type.getName() + " has no constructor of " + args.length + " argument(s)");
    }

    /** A method of no arguments that is not public (or of a class that is not). */
    private static Method hidden(Class<?> type, String name) throws Exception {
        Method method = type.getDeclaredMethod(name);
        method.setAccessible(true);
        return method;
    }
}
