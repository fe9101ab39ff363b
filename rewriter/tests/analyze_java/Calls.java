import java.util.*;
import java.util.function.*;

interface Greeter {
    String greet(String who);
    default String hello() { return greet("world"); }
    static Greeter polite() { return w -> "dear " + w; }
}

abstract class Shape {
    abstract double area();
}

class DefaultUser implements Greeter {
    public String greet(String who) { return who; }
    String useDefault() { return hello(); }
}

public class Calls implements Greeter {
    private int x;
    public Calls() { super(); }
    public String greet(String who) { return "hi " + who + x; }
    static int twice(int a) { return a * 2; }
    private void priv() { x++; }
    public String hello() { return Greeter.super.hello(); }
    public void all(List<String> list) {
        int y = twice(3);
        String s = greet("a");
        list.size();
        priv();
        Runnable r = () -> System.out.println(x);
        Function<String, Integer> f = String::length;
        Supplier<ArrayList<String>> c = ArrayList::new;
        Greeter g = this;
        g.hello();
        new StringBuilder().append(y);
        Greeter.polite();
    }
    int leaf(int a) {
        switch (a) { case 1: return 5; case 7: return 9; case 1000: return 3; default: break; }
        switch (a) { case 0: return 1; case 1: return 2; case 2: return 4; case 3: return 8; default: return a + 1; }
    }
    /** More than 255 local slots: loads, stores and iinc need the wide prefix. */
    long wideLocals(long a) {
        long v0 = a, v1 = a, v2 = a, v3 = a, v4 = a, v5 = a, v6 = a, v7 = a, v8 = a, v9 = a;
        long v10 = a, v11 = a, v12 = a, v13 = a, v14 = a, v15 = a, v16 = a, v17 = a, v18 = a, v19 = a;
        long v20 = a, v21 = a, v22 = a, v23 = a, v24 = a, v25 = a, v26 = a, v27 = a, v28 = a, v29 = a;
        long v30 = a, v31 = a, v32 = a, v33 = a, v34 = a, v35 = a, v36 = a, v37 = a, v38 = a, v39 = a;
        long v40 = a, v41 = a, v42 = a, v43 = a, v44 = a, v45 = a, v46 = a, v47 = a, v48 = a, v49 = a;
        long v50 = a, v51 = a, v52 = a, v53 = a, v54 = a, v55 = a, v56 = a, v57 = a, v58 = a, v59 = a;
        long v60 = a, v61 = a, v62 = a, v63 = a, v64 = a, v65 = a, v66 = a, v67 = a, v68 = a, v69 = a;
        long v70 = a, v71 = a, v72 = a, v73 = a, v74 = a, v75 = a, v76 = a, v77 = a, v78 = a, v79 = a;
        long v80 = a, v81 = a, v82 = a, v83 = a, v84 = a, v85 = a, v86 = a, v87 = a, v88 = a, v89 = a;
        long v90 = a, v91 = a, v92 = a, v93 = a, v94 = a, v95 = a, v96 = a, v97 = a, v98 = a, v99 = a;
        long v100 = a, v101 = a, v102 = a, v103 = a, v104 = a, v105 = a, v106 = a, v107 = a, v108 = a, v109 = a;
        long v110 = a, v111 = a, v112 = a, v113 = a, v114 = a, v115 = a, v116 = a, v117 = a, v118 = a, v119 = a;
        long v120 = a, v121 = a, v122 = a, v123 = a, v124 = a, v125 = a, v126 = a, v127 = a, v128 = a, v129 = a;
        int i = 0;
        i += 1000;
        return v0 + v64 + v129 + i + twice(i);
    }
    native void nat();
}
