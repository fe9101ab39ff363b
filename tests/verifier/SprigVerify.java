package sprigverify;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.instrument.ClassDefinition;
import java.lang.instrument.Instrumentation;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * Checks class files with HotSpot's own verifier, originals against
 * instrumented versions.
 *
 * <p>Run as {@code java -Xverify:all -javaagent:verify.jar -cp verify.jar
 * sprigverify.SprigVerify JOBFILE}. Each job line is
 * {@code KIND<TAB>UNIT<TAB>ORIGINAL.zip<TAB>INSTRUMENTED.zip}; both zips hold
 * the same entry names. KIND {@code jdk}: entries are
 * {@code module/pkg/Name.class} of the running JDK's own image; each class is
 * loaded from its module, then redefined with the original bytes and with the
 * instrumented bytes (HotSpot verifies every class handed to RedefineClasses
 * when -Xverify:all turns on BytecodeVerificationLocal and Remote), then
 * restored. KIND {@code app}: entries are {@code pkg/Name.class}; each class
 * is defined by a fresh loader (dependencies come from the unit itself, then
 * from every app unit's originals), then redefined the same way.
 *
 * <p>Output, one line each: {@code UNIT name total=N loaded=N orig_ok=N
 * instr_ok=N changed=N unchecked=N}, {@code NOLOAD unit class reason},
 * {@code ORIGFAIL unit class reason}, {@code FAIL unit class reason},
 * {@code RETRIED unit class reason} (a JDK class checked as a child-first
 * copy because its live version differs from the image), after a
 * first line {@code JAVA version}, and a final {@code DONE}.
 */
public final class SprigVerify {
    private static volatile Instrumentation inst;
    private static final int BATCH = 256;
    /** Classes HotSpot never verifies (bootstrapping), see Verifier::is_eligible_for_verification. */
    private static final List<String> UNVERIFIED =
            Arrays.asList("java.lang.Object", "java.lang.Class", "java.lang.String", "java.lang.Throwable");

    public static void premain(String args, Instrumentation i) {
        inst = i;
    }

    public static void agentmain(String args, Instrumentation i) {
        inst = i;
    }

    /** Original and instrumented bytes of one unit, by entry name. */
    static final class Unit {
        final String kind;
        final String name;
        final ZipFile original;
        final ZipFile instrumented;

        Unit(String kind, String name, ZipFile original, ZipFile instrumented) {
            this.kind = kind;
            this.name = name;
            this.original = original;
            this.instrumented = instrumented;
        }

        byte[] read(ZipFile zip, String entry) throws IOException {
            ZipEntry e = zip.getEntry(entry);
            if (e == null) {
                return null;
            }
            try (InputStream in = zip.getInputStream(e)) {
                return in.readAllBytes();
            }
        }
    }

    /** Defines classes of one app unit; falls back to every app unit's originals. */
    static final class UnitLoader extends ClassLoader {
        private final Unit unit;
        private final List<Unit> world;

        UnitLoader(Unit unit, List<Unit> world) {
            super("sprig-verify-" + unit.name, ClassLoader.getSystemClassLoader());
            this.unit = unit;
            this.world = world;
        }

        @Override
        protected Class<?> findClass(String name) throws ClassNotFoundException {
            String entry = name.replace('.', '/') + ".class";
            try {
                byte[] b = unit.read(unit.original, entry);
                for (int i = 0; b == null && i < world.size(); i++) {
                    b = world.get(i).read(world.get(i).original, entry);
                }
                if (b == null) {
                    throw new ClassNotFoundException(name);
                }
                return defineClass(name, b, 0, b.length);
            } catch (IOException e) {
                throw new ClassNotFoundException(name, e);
            }
        }
    }

    /** One loaded class and its two versions. */
    static final class Item {
        final String className;
        final Class<?> cls;
        final byte[] original;
        final byte[] instrumented;

        Item(String className, Class<?> cls, byte[] original, byte[] instrumented) {
            this.className = className;
            this.cls = cls;
            this.original = original;
            this.instrumented = instrumented;
        }
    }

    private static PrintStream out;
    /** The run's JDK units, and the loader of child-first copies of their classes (made on first use). */
    private static final List<Unit> jdkUnits = new ArrayList<>();
    private static ChildFirstLoader jdkCopies;

    public static void main(String[] args) throws Exception {
        out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (inst == null) {
            out.println("ERROR not started as an agent (-javaagent:verify.jar)");
            System.exit(2);
        }
        if (!inst.isRedefineClassesSupported()) {
            out.println("ERROR RedefineClasses not supported");
            System.exit(2);
        }
        out.println("JAVA " + Runtime.version());
        List<Unit> units = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(Path.of(args[0]))) {
            for (String line; (line = r.readLine()) != null; ) {
                if (line.isBlank()) {
                    continue;
                }
                String[] f = line.split("\t");
                units.add(new Unit(f[0], f[1], new ZipFile(f[2]), new ZipFile(f[3])));
            }
        }
        List<Unit> world = new ArrayList<>();
        for (Unit u : units) {
            if (u.kind.equals("app")) {
                world.add(u);
            } else {
                jdkUnits.add(u);
            }
        }
        for (Unit u : units) {
            runUnit(u, world);
        }
        out.println("DONE");
    }

    private static void runUnit(Unit u, List<Unit> world) throws IOException {
        UnitLoader loader = u.kind.equals("app") ? new UnitLoader(u, world) : null;
        List<Item> items = new ArrayList<>();
        int total = 0;
        int changed = 0;
        int unchecked = 0;
        for (Enumeration<? extends ZipEntry> en = u.original.entries(); en.hasMoreElements(); ) {
            ZipEntry e = en.nextElement();
            String entry = e.getName();
            if (!entry.endsWith(".class") || entry.endsWith("module-info.class")
                    || entry.startsWith("META-INF/")) {
                continue;
            }
            total++;
            String path = entry.substring(0, entry.length() - ".class".length());
            String module = null;
            if (u.kind.equals("jdk")) {
                int slash = path.indexOf('/');
                module = path.substring(0, slash);
                path = path.substring(slash + 1);
            }
            String className = path.replace('/', '.');
            byte[] orig = u.read(u.original, entry);
            byte[] instr = u.read(u.instrumented, entry);
            Class<?> cls;
            try {
                if (loader != null) {
                    cls = Class.forName(className, false, loader);
                } else {
                    Optional<Module> m = ModuleLayer.boot().findModule(module);
                    if (m.isEmpty()) {
                        out.println("NOLOAD " + u.name + " " + className + " module " + module + " not in the boot layer");
                        continue;
                    }
                    cls = Class.forName(m.get(), className);
                    if (cls == null) {
                        out.println("NOLOAD " + u.name + " " + className + " not found in " + module);
                        continue;
                    }
                }
            } catch (Throwable t) {
                out.println("NOLOAD " + u.name + " " + className + " " + oneLine(t));
                continue;
            }
            if (!inst.isModifiableClass(cls)) {
                out.println("NOLOAD " + u.name + " " + className + " not modifiable");
                continue;
            }
            if (instr == null) {
                instr = orig;
            }
            if (!Arrays.equals(orig, instr)) {
                changed++;
                if (cls.getClassLoader() == null && UNVERIFIED.contains(className)) {
                    unchecked++;
                }
            }
            items.add(new Item(className, cls, orig, instr));
        }
        int loaded = items.size();
        int origOk = 0;
        int instrOk = 0;
        // JDK classes whose original bytes cannot be redefined into the live class.
        Map<Item, String> retry = u.kind.equals("jdk") ? new LinkedHashMap<>() : null;
        for (int from = 0; from < items.size(); from += BATCH) {
            List<Item> batch = items.subList(from, Math.min(items.size(), from + BATCH));
            List<Item> good = new ArrayList<>();
            redefine(batch, false, good, "ORIGFAIL", u.name, retry);
            origOk += good.size();
            List<Item> instrumented = new ArrayList<>();
            redefine(good, true, instrumented, "FAIL", u.name);
            instrOk += instrumented.size();
            // Put the originals back so the rest of the run executes original code.
            List<Item> restored = new ArrayList<>();
            redefine(instrumented, false, restored, "RESTOREFAIL", u.name);
        }
        if (retry != null && !retry.isEmpty()) {
            int[] counts = retryChildFirst(u, retry);
            origOk += counts[0];
            instrOk += counts[1];
        }
        out.println("UNIT " + u.name + " total=" + total + " loaded=" + loaded + " orig_ok=" + origOk
                + " instr_ok=" + instrOk + " changed=" + changed + " unchecked=" + unchecked);
    }

    /**
     * JDK classes whose live version differs from the image (JFR adds fields to
     * event classes when they load) cannot take their image bytes back.
     * Outside java.* they can still be checked: a child-first loader defines
     * fresh copies of them and of the JDK classes they need, and
     * those copies are redefined like application classes. Returns
     * {originals verified, instrumented verified}.
     */
    private static int[] retryChildFirst(Unit u, Map<Item, String> retry) {
        if (jdkCopies == null) {
            jdkCopies = new ChildFirstLoader(jdkUnits);
        }
        ChildFirstLoader loader = jdkCopies;
        List<Item> copies = new ArrayList<>();
        Map<String, String> firstError = new HashMap<>();
        for (Map.Entry<Item, String> e : retry.entrySet()) {
            Item it = e.getKey();
            firstError.put(it.className, e.getValue());
            if (it.className.startsWith("java.")) {
                out.println("ORIGFAIL " + u.name + " " + it.className + " " + e.getValue());
                continue;
            }
            try {
                Class<?> copy = Class.forName(it.className, false, loader);
                copies.add(new Item(it.className, copy, it.original, it.instrumented));
            } catch (Throwable t) {
                out.println("ORIGFAIL " + u.name + " " + it.className + " " + e.getValue()
                        + "; child-first copy: " + oneLine(t));
            }
        }
        Map<Item, String> failed = new LinkedHashMap<>();
        List<Item> good = new ArrayList<>();
        redefine(copies, false, good, "ORIGFAIL", u.name, failed);
        for (Map.Entry<Item, String> e : failed.entrySet()) {
            out.println("ORIGFAIL " + u.name + " " + e.getKey().className + " "
                    + firstError.get(e.getKey().className) + "; child-first copy: " + e.getValue());
        }
        for (Item it : good) {
            out.println("RETRIED " + u.name + " " + it.className + " checked as a child-first copy: "
                    + firstError.get(it.className));
        }
        List<Item> instrumented = new ArrayList<>();
        redefine(good, true, instrumented, "FAIL", u.name);
        return new int[] {good.size(), instrumented.size()};
    }

    /**
     * Defines every class of the run's JDK units (outside java.*) itself,
     * before asking its parent, so copies link against copies even across
     * modules (jdk.jfr.Event extends java.base's jdk.internal.event.Event).
     */
    static final class ChildFirstLoader extends ClassLoader {
        private final Map<String, Unit> units = new HashMap<>();
        private final Map<String, String> entries = new HashMap<>();

        ChildFirstLoader(List<Unit> jdkUnits) {
            super("sprig-verify-child-first", ClassLoader.getSystemClassLoader());
            for (Unit unit : jdkUnits) {
                for (Enumeration<? extends ZipEntry> en = unit.original.entries(); en.hasMoreElements(); ) {
                    String entry = en.nextElement().getName();
                    int slash = entry.indexOf('/');
                    if (slash > 0 && entry.endsWith(".class")) {
                        String name = entry.substring(slash + 1, entry.length() - ".class".length()).replace('/', '.');
                        if (entries.putIfAbsent(name, entry) == null) {
                            units.put(name, unit);
                        }
                    }
                }
            }
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                String entry = entries.get(name);
                if (c == null && entry != null && !name.startsWith("java.")) {
                    try {
                        Unit unit = units.get(name);
                        byte[] b = unit.read(unit.original, entry);
                        c = defineClass(name, b, 0, b.length);
                    } catch (IOException e) {
                        throw new ClassNotFoundException(name, e);
                    }
                }
                return c != null ? c : super.loadClass(name, resolve);
            }
        }
    }

    /**
     * Redefines {@code items} with their original or instrumented bytes; the
     * ones that succeed go to {@code ok}, failures are printed with {@code tag}.
     * A failed batch is split in halves until each failure is one class.
     */
    private static void redefine(List<Item> items, boolean instrumented, List<Item> ok, String tag, String unit) {
        redefine(items, instrumented, ok, tag, unit, null);
    }

    /** As above; with {@code failed} set, single-class failures go there instead of the output. */
    private static void redefine(List<Item> items, boolean instrumented, List<Item> ok, String tag, String unit,
            Map<Item, String> failed) {
        if (items.isEmpty()) {
            return;
        }
        ClassDefinition[] defs = new ClassDefinition[items.size()];
        for (int i = 0; i < defs.length; i++) {
            Item it = items.get(i);
            defs[i] = new ClassDefinition(it.cls, instrumented ? it.instrumented : it.original);
        }
        try {
            inst.redefineClasses(defs);
            ok.addAll(items);
        } catch (Throwable t) {
            if (items.size() == 1) {
                if (failed != null) {
                    failed.put(items.get(0), oneLine(t));
                } else {
                    out.println(tag + " " + unit + " " + items.get(0).className + " " + oneLine(t));
                }
                return;
            }
            int mid = items.size() / 2;
            redefine(items.subList(0, mid), instrumented, ok, tag, unit, failed);
            redefine(items.subList(mid, items.size()), instrumented, ok, tag, unit, failed);
        }
    }

    private static String oneLine(Throwable t) {
        String s = t.getClass().getName() + ": " + t.getMessage();
        Throwable c = t.getCause();
        if (c != null && c != t) {
            s += " (cause " + c.getClass().getName() + ": " + c.getMessage() + ")";
        }
        return s.replace('\n', ' ').replace('\r', ' ');
    }
}
