import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.attribute.CodeAttribute;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.jar.JarFile;

/**
 * How many bytes of bytecode the probes add to each method, and how many
 * methods that moves past HotSpot's inlining sizes: reads pairs of jars
 * (as shipped, as `sprig rewrite` wrote them) and compares the code
 * length of every method but class initialisers. Needs JDK 24 or later
 * (java.lang.classfile). Run by scripts/measure/probe-footprint.sh:
 *   java CodeLengths.java ORIGINAL.jar REWRITTEN.jar [ORIGINAL.jar REWRITTEN.jar ...]
 */
public class CodeLengths {
    static Map<String, Integer> lengths(String jar) throws Exception {
        Map<String, Integer> out = new HashMap<>();
        try (JarFile j = new JarFile(jar)) {
            for (var e : Collections.list(j.entries())) {
                if (!e.getName().endsWith(".class")) {
                    continue;
                }
                ClassModel cm = ClassFile.of().parse(j.getInputStream(e).readAllBytes());
                for (MethodModel m : cm.methods()) {
                    String name = m.methodName().stringValue();
                    if (name.equals("<clinit>")) {
                        continue;
                    }
                    m.findAttribute(java.lang.classfile.Attributes.code()).ifPresent(c ->
                            out.put(cm.thisClass().asInternalName() + "::" + name
                                    + m.methodType().stringValue(), ((CodeAttribute) c).codeLength()));
                }
            }
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        List<Integer> growth = new ArrayList<>();
        int small = 0, crossSmall = 0, medium = 0, crossMedium = 0;
        for (int i = 0; i + 1 < args.length; i += 2) {
            Map<String, Integer> before = lengths(args[i]);
            Map<String, Integer> after = lengths(args[i + 1]);
            for (var e : before.entrySet()) {
                Integer a = after.get(e.getKey());
                if (a == null) {
                    continue;
                }
                int b = e.getValue();
                growth.add(a - b);
                if (b <= 35) {
                    small++;
                    if (a > 35) {
                        crossSmall++;
                    }
                }
                if (b <= 325) {
                    medium++;
                    if (a > 325) {
                        crossMedium++;
                    }
                }
            }
        }
        Collections.sort(growth);
        int n = growth.size();
        if (n == 0) {
            System.out.println("no method found in both jars");
            System.exit(1);
        }
        System.out.printf("methods %d; bytes added: median %d, 10th percentile %d, 90th %d%n",
                n, growth.get(n / 2), growth.get(n / 10), growth.get(9 * n / 10));
        System.out.printf("past MaxInlineSize (35): %d of the %d methods of at most 35 bytes%n",
                crossSmall, small);
        System.out.printf("past FreqInlineSize (325): %d of the %d methods of at most 325 bytes%n",
                crossMedium, medium);
    }
}
