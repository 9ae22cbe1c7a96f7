package org.mqstore.filter;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.filter.FilterFactory;
import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;

/**
 * Compiles and evaluates SQL92 expressions with RocketMQ's own filter, as its broker does
 * ({@code FilterFactory.INSTANCE.get("SQL92").compile}, then {@code evaluate} against a
 * message's properties).  One request per stdin line, fields separated by tabs, each field
 * hex-encoded UTF-8 (no escaping to get wrong):
 *
 * <pre>
 *   in:  EXPRESSION [TAB MAP]...     a MAP is name=value pairs: NAME,VALUE,NAME,VALUE ...
 *   out: ok RESULTS | error MESSAGE  RESULTS: one letter per map, T, F, N (null), X (threw)
 * </pre>
 */
public final class Sql92Oracle {
    private Sql92Oracle() {
    }

    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in,
            StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] fields = line.split("\t", -1);
            Expression expression;
            try {
                expression = FilterFactory.INSTANCE.get("SQL92").compile(decode(fields[0]));
            } catch (Throwable refused) {
                out.println("error " + String.valueOf(refused.getMessage()).replace('\n', ' '));
                continue;
            }
            StringBuilder results = new StringBuilder();
            for (int i = 1; i < fields.length; i++) {
                results.append(evaluate(expression, properties(fields[i])));
            }
            out.println("ok " + results);
        }
    }

    private static char evaluate(Expression expression, Map<String, Object> properties) {
        EvaluationContext context = new EvaluationContext() {
            @Override
            public Object get(String name) {
                return properties.get(name);
            }

            @Override
            public Map<String, Object> keyValues() {
                return properties;
            }
        };
        try {
            Object value = expression.evaluate(context);
            if (value == null) {
                return 'N';
            }
            return Boolean.TRUE.equals(value) ? 'T' : Boolean.FALSE.equals(value) ? 'F' : '?';
        } catch (Throwable thrown) {
            return 'X';
        }
    }

    private static Map<String, Object> properties(String field) {
        Map<String, Object> properties = new HashMap<>();
        if (field.isEmpty()) {
            return properties;
        }
        String[] parts = field.split(",", -1);
        for (int i = 0; i + 1 < parts.length; i += 2) {
            properties.put(decode(parts[i]), decode(parts[i + 1]));
        }
        return properties;
    }

    private static String decode(String hex) {
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
