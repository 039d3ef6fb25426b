// What cutover's Java helpers (the programs beside this file) share: the client properties file, JSON string
// quoting, and the one line an error prints on stderr. cutover.jvm.program compiles it into the source of each
// program that names it (a program is one source file, so this class has no imports and is not public).
final class Cli {
    private Cli() {
    }

    /** The Java client properties file at `path` (cutover writes it private, and removes it after the run). */
    static java.util.Properties properties(String path) throws java.io.IOException {
        java.util.Properties props = new java.util.Properties();
        try (java.io.FileInputStream in = new java.io.FileInputStream(path)) {
            props.load(in);
        }
        return props;
    }

    /** `s` as a JSON string, quotes included. */
    static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    /** What an ExecutionException wraps (the Admin API's futures), else the error itself. */
    static Throwable cause(Throwable e) {
        return e instanceof java.util.concurrent.ExecutionException && e.getCause() != null ? e.getCause() : e;
    }

    /** The error's class and message on stderr as one line after `prefix` (cutover reads the last line), then
     *  exit with `code`. */
    static void fail(String prefix, Throwable e, int code) {
        System.err.println(prefix + e.getClass().getSimpleName() + ": " + e.getMessage());
        System.exit(code);
    }
}
