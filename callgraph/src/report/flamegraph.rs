//! Interactive flame graphs: one self-contained HTML page (no external
//! script, style sheet, font or request) holding an SVG flame graph of the
//! calling context tree and the call tree beside it.
//!
//! The page's content security policy forbids every request (only its
//! inline script and style run), so opening it fetches nothing.
//!
//! The SVG is laid out here, not in the browser: every shown node is one
//! `<g class="f">` with a `<rect>` whose width is its exact total time, its
//! children stacked above it (roots at the bottom), children left to right
//! in the report's order (exact total descending, then name). Each frame
//! carries its figures as `data-` attributes and a `<title>`, so the page
//! reads without its script too. The small inline script adds what needs a
//! browser: click a frame (or a line of the tree) to zoom into it, Escape
//! or the reset button to zoom out, a search box that highlights the
//! frames whose method matches and sums their share, and a status line
//! with the figures of the frame under the pointer.
//!
//! [`DiffFlameGraph`] draws `sprig diff`: widths are the second profile's
//! exact totals, colours the change from the first (red slower, blue
//! faster, the deeper the larger the change), by exact time or, with the
//! toggle, by calls. Paths found only in the first profile have no width
//! there: they are in the page (and the tree beside it) with width 0.

use super::escape::escape;
use super::view::{stack_view, truncated_frame};
use super::{Render, RenderOptions, ms, percent};
use crate::cct::diff::ProfileDiff;
use crate::profile::{Metric, NodeId, Profile, ThreadProfile};
use std::io::{self, Write};

/// `--format flamegraph` for one profile.
pub struct FlameGraph;

/// `sprig diff --format flamegraph`.
pub struct DiffFlameGraph;

/// Width of the SVG's coordinate system.
const WIDTH: f64 = 1200.0;
/// Height of one frame.
const ROW: u32 = 17;
/// Frames narrower than this (in SVG units) get no label.
const LABEL_MIN: f64 = 24.0;
/// Approximate width of one label character at the page's font size.
const CHAR_W: f64 = 7.0;

/// One drawn frame.
#[derive(Clone, Debug, PartialEq)]
struct Frame {
    /// Full name, `pkg.Class.method(desc)` (or a thread's name).
    name: String,
    /// Short label, `Class::method`.
    label: String,
    depth: usize,
    /// Left edge and width, in nanoseconds of the drawn value.
    x: u64,
    w: u64,
    calls: u64,
    total_ns: u64,
    self_ns: u64,
    /// CSS colour.
    fill: String,
    /// For a differential graph: the colour by calls, the text of the
    /// change shown in the status line, and its short form (`+12.5%`).
    diff: Option<(String, String, String)>,
}

/// What the page shows.
struct Page {
    title: String,
    subtitle: String,
    frames: Vec<Frame>,
    /// The sum of the roots' widths.
    total: u64,
    differential: bool,
}

impl Render for FlameGraph {
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        let mut frames = Vec::new();
        let mut total = 0u64;
        if opts.thread_frames {
            for t in &p.threads {
                let name = t.display_name();
                total =
                    total.saturating_add(add_thread(p, t, Some(name), opts, total, &mut frames));
            }
        } else {
            total = add_thread(p, &p.merged(), None, opts, 0, &mut frames);
        }
        let how = p.timing.name();
        let (all, widths) = match opts.weight {
            Metric::Time => (
                format!("{} ms {how} total", ms(total)),
                format!("{how} total time"),
            ),
            m => (format!("{total} {} in all", m.name()), m.name().to_owned()),
        };
        let subtitle = format!(
            "{} {} · {} thread(s) · {all} · widths: {widths}",
            p.target.jvm,
            if p.target.pid > 0 {
                format!("pid {}", p.target.pid)
            } else {
                String::new()
            },
            p.threads.len(),
        );
        write_page(
            &Page {
                title: "sprig flame graph".to_owned(),
                subtitle,
                frames,
                total,
                differential: false,
            },
            out,
        )
    }
}

/// Lays out one thread's tree (or the merged tree) from `x0` on; returns
/// the width it took.
fn add_thread(
    p: &Profile,
    t: &ThreadProfile,
    thread_frame: Option<String>,
    opts: &RenderOptions,
    x0: u64,
    frames: &mut Vec<Frame>,
) -> u64 {
    let view = stack_view(p, &t.tree, opts);
    let base = usize::from(thread_frame.is_some());
    if let Some(name) = thread_frame {
        let calls = t
            .tree
            .roots
            .iter()
            .filter_map(|&r| t.tree.nodes.get(r as usize))
            .map(|n| n.calls)
            .sum();
        frames.push(Frame {
            label: name.clone(),
            name,
            depth: 0,
            x: x0,
            w: view.total,
            calls,
            total_ns: t
                .tree
                .roots
                .iter()
                .filter_map(|&r| view.times.get(r as usize))
                .map(|x| x.total_ns)
                .fold(0u64, u64::saturating_add),
            self_ns: 0,
            fill: "#c8c8c8".to_owned(),
            diff: None,
        });
    }
    let mut cursor: Vec<u64> = vec![x0];
    for line in &view.lines {
        let depth = line.depth + base;
        let times = view.times[line.node as usize];
        let w = view.weights[line.node as usize].total;
        let node = &t.tree.nodes[line.node as usize];
        cursor.truncate(line.depth + 1);
        let x = cursor[line.depth];
        cursor[line.depth] = x.saturating_add(w);
        cursor.push(x);
        let m = p.method(node.method);
        frames.push(Frame {
            name: m.display(),
            label: short_label(&m.class, &m.name),
            depth,
            x,
            w,
            calls: node.calls,
            total_ns: times.total_ns,
            self_ns: times.self_ns,
            fill: warm(&m.class),
            diff: None,
        });
        if let Some(cut) = view.cut(line) {
            let name = truncated_frame(cut.frames);
            frames.push(Frame {
                label: name.clone(),
                name,
                depth: depth + 1,
                x,
                w: cut.total,
                calls: cut.calls,
                total_ns: cut.total_ns,
                self_ns: 0,
                fill: TRUNCATED_FILL.to_owned(),
                diff: None,
            });
        }
    }
    view.total
}

/// Colour of a `[truncated N frames]` frame.
const TRUNCATED_FILL: &str = "#a0a0a0";

impl DiffFlameGraph {
    pub fn render(
        &self,
        d: &ProfileDiff,
        opts: &RenderOptions,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let total_of = |n: NodeId| d.nodes[n as usize].b.map_or(0, |s| s.total_ns);
        // A figure of the weight: milliseconds of time, or a count of
        // objects or bytes (`~` where it is an estimate).
        let val = |v: u64| -> String {
            use crate::cct::diff::DiffWeight as W;
            match d.weight {
                W::Time => ms(v),
                W::Objects | W::Bytes => v.to_string(),
                W::SampledBytes | W::LiveBytes => format!("~{v}"),
            }
        };
        let u = {
            use crate::cct::diff::DiffWeight as W;
            match d.weight {
                W::Time => " ms",
                W::Objects => " objects",
                W::Bytes | W::SampledBytes | W::LiveBytes => " bytes",
            }
        };
        let fig = |v: u64| format!("{}{u}", val(v));
        let total: u64 = d.roots.iter().map(|&r| total_of(r)).sum();
        let mut frames = Vec::new();
        // Pre-order, children by the second profile's total descending.
        let mut stack: Vec<(NodeId, usize, u64)> = Vec::new();
        let mut roots = d.roots.clone();
        roots.sort_by(|&a, &b| total_of(b).cmp(&total_of(a)).then(a.cmp(&b)));
        let mut x = 0u64;
        let mut starts = Vec::new();
        for &r in &roots {
            starts.push((r, 0usize, x));
            x = x.saturating_add(total_of(r));
        }
        stack.extend(starts.into_iter().rev());
        let mut depths = None;
        while let Some((n, depth, x)) = stack.pop() {
            if opts.max_depth.is_some_and(|m| depth >= m) {
                continue;
            }
            let node = &d.nodes[n as usize];
            let b = node.b.unwrap_or_default();
            let a = node.a.unwrap_or_default();
            if opts.min_percent > 0.0
                && (b.total_ns as f64) * 100.0 < opts.min_percent * total as f64
            {
                continue;
            }
            let dt = node.delta_total_ns();
            let dc = node.delta_calls();
            let by_time = diverging(dt as f64, a.total_ns.max(b.total_ns) as f64);
            let by_calls = diverging(dc as f64, a.calls.max(b.calls) as f64);
            let change = format!(
                "{} → {} ({}{}, {}), calls {} → {} ({}{})",
                val(a.total_ns),
                fig(b.total_ns),
                if dt >= 0 { "+" } else { "-" },
                fig(dt.unsigned_abs().min(u64::MAX as u128) as u64),
                change_text(a.total_ns, b.total_ns),
                a.calls,
                b.calls,
                if dc >= 0 { "+" } else { "" },
                dc
            );
            frames.push(Frame {
                name: node.method.display(),
                label: short_label(&node.method.class, &node.method.name),
                depth,
                x,
                w: b.total_ns,
                calls: b.calls,
                total_ns: b.total_ns,
                self_ns: b.self_ns,
                fill: by_time,
                diff: Some((by_calls, change, change_text(a.total_ns, b.total_ns))),
            });
            let kids: Vec<NodeId> = node
                .children
                .iter()
                .copied()
                .filter(|&c| c > n && (c as usize) < d.nodes.len())
                .collect();
            if depth + 1 >= opts.max_stack.max(1) && opts.max_depth.is_none_or(|m| depth + 1 < m) {
                // The last frame a stack holds: what lies deeper (and
                // would be shown) is one `[truncated N frames]` frame.
                let shown: Vec<NodeId> = kids
                    .into_iter()
                    .filter(|&c| {
                        opts.min_percent <= 0.0
                            || (total_of(c) as f64) * 100.0 >= opts.min_percent * total as f64
                    })
                    .collect();
                if let Some(c) = super::diff::cut(d, &shown, &mut depths) {
                    let name = truncated_frame(c.frames);
                    let dt = c.b_ns as i128 - c.a_ns as i128;
                    let change = format!(
                        "{} → {} ({}{}, {})",
                        val(c.a_ns),
                        fig(c.b_ns),
                        if dt >= 0 { "+" } else { "-" },
                        fig(dt.unsigned_abs().min(u64::MAX as u128) as u64),
                        change_text(c.a_ns, c.b_ns)
                    );
                    frames.push(Frame {
                        label: name.clone(),
                        name,
                        depth: depth + 1,
                        x,
                        w: c.b_ns,
                        calls: 0,
                        total_ns: c.b_ns,
                        self_ns: 0,
                        fill: TRUNCATED_FILL.to_owned(),
                        diff: Some((
                            TRUNCATED_FILL.to_owned(),
                            change,
                            change_text(c.a_ns, c.b_ns),
                        )),
                    });
                }
                continue;
            }
            let mut kids = kids;
            kids.sort_by(|&p, &q| total_of(q).cmp(&total_of(p)).then(p.cmp(&q)));
            let mut cx = x;
            let mut placed = Vec::new();
            for c in kids {
                placed.push((c, depth + 1, cx));
                cx = cx.saturating_add(total_of(c));
            }
            stack.extend(placed.into_iter().rev());
        }
        write_page(
            &Page {
                title: "sprig differential flame graph".to_owned(),
                subtitle: match d.weight {
                    crate::cct::diff::DiffWeight::Time => format!(
                        "widths: the second profile's {} total time ({} ms) · red: slower (or more calls), blue: faster (or fewer calls)",
                        d.timing[1].name(),
                        ms(total)
                    ),
                    w => format!(
                        "widths: the second profile's {} ({}, {}) · red: more (or more calls), blue: fewer (or fewer calls)",
                        w.name(),
                        fig(total),
                        if matches!(
                            w,
                            crate::cct::diff::DiffWeight::SampledBytes
                                | crate::cct::diff::DiffWeight::LiveBytes
                        ) {
                            "estimates from allocation samples"
                        } else {
                            "exact"
                        }
                    ),
                },
                frames,
                total,
                differential: true,
            },
            out,
        )
    }
}

/// `+12.5%`, `new`, `gone`.
fn change_text(a: u64, b: u64) -> String {
    match (a, b) {
        (0, 0) => "0%".to_owned(),
        (0, _) => "new".to_owned(),
        (_, 0) => "gone".to_owned(),
        _ => format!("{:+.1}%", (b as f64 - a as f64) * 100.0 / a as f64),
    }
}

/// Red for a positive change, blue for a negative one, white for none; the
/// colour deepens with the change's size relative to `scale`.
fn diverging(delta: f64, scale: f64) -> String {
    let r = if scale > 0.0 {
        (delta / scale).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    // 0.15 of tint even for a tiny change, so that any change shows.
    let k = if r == 0.0 { 0.0 } else { 0.15 + 0.85 * r.abs() };
    let fade = (255.0 * (1.0 - k)).round() as u8;
    if r > 0.0 {
        format!("rgb(255,{fade},{fade})")
    } else if r < 0.0 {
        format!("rgb({fade},{fade},255)")
    } else {
        "rgb(235,235,235)".to_owned()
    }
}

/// A warm colour that is the same for every method of a class, so a
/// class's frames read as one family across the graph.
fn warm(class: &str) -> String {
    // FNV-1a, spread over three channels.
    let mut h: u32 = 0x811c_9dc5;
    for b in class.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let r = 200 + (h & 0x37) as u8;
    let g = 90 + ((h >> 8) % 140) as u8;
    let b = ((h >> 16) % 60) as u8;
    format!("rgb({r},{g},{b})")
}

/// `Class::method` with the package left out.
fn short_label(class: &str, name: &str) -> String {
    let simple = class.rsplit(['.', '/']).next().unwrap_or(class);
    format!("{simple}::{name}")
}

/// Text safe inside HTML and SVG, attributes included; control characters
/// (which a class or thread name may hold) are written out as the text
/// report writes them ([`escape`]).
fn esc(s: &str) -> String {
    let s = escape(s);
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A label cut to what fits `width` SVG units.
fn fit(label: &str, width: f64) -> String {
    if width < LABEL_MIN {
        return String::new();
    }
    let room = ((width - 6.0) / CHAR_W).floor() as usize;
    let n = label.chars().count();
    if n <= room {
        label.to_owned()
    } else if room <= 2 {
        String::new()
    } else {
        let mut s: String = label.chars().take(room - 2).collect();
        s.push_str("..");
        s
    }
}

/// Writes the page; the frames and the call tree go straight to `out`,
/// never held as one more copy of the page.
fn write_page(page: &Page, out: &mut dyn Write) -> io::Result<()> {
    let max_depth = page.frames.iter().map(|f| f.depth).max().unwrap_or(0);
    let height = (max_depth as u32 + 1) * ROW;
    let scale = if page.total > 0 {
        WIDTH / page.total as f64
    } else {
        0.0
    };
    let toggle = if page.differential {
        "<label><input type=\"checkbox\" id=\"bycalls\"> colour by calls</label>"
    } else {
        ""
    };
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"sprig\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n\
         <title>{title}</title>\n<style>{STYLE}</style></head>\n<body>\n\
         <header><h1>{title}</h1><p class=\"sub\">{sub}</p>\n\
         <div class=\"bar\"><button id=\"reset\" type=\"button\">reset zoom</button>\
         <input id=\"search\" type=\"search\" placeholder=\"search methods (regular expression)\" size=\"40\">\
         <span id=\"matched\"></span>{toggle}\
         <label title=\"give the call tree more room and wrap its names instead of cutting them\">\
         <input type=\"checkbox\" id=\"whole\"> whole names in the tree</label></div>\n\
         <p id=\"status\">{frames} frames · click a frame to zoom, Escape to zoom out</p></header>\n\
         <main><section id=\"graph\"><svg id=\"fg\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" \
         data-total=\"{total}\" data-height=\"{height}\">\n",
        title = esc(&page.title),
        sub = esc(&page.subtitle),
        frames = page.frames.len(),
        total = page.total,
    )?;
    for (i, f) in page.frames.iter().enumerate() {
        let x = f.x as f64 * scale;
        let w = f.w as f64 * scale;
        let y = (max_depth - f.depth) as u32 * ROW;
        let share = percent(f.w, page.total);
        let (fill_calls, change) = match &f.diff {
            Some((c, t, _)) => (
                format!(" data-fc=\"{c}\""),
                format!(" data-ch=\"{}\"", esc(t)),
            ),
            None => (String::new(), String::new()),
        };
        // Escaped piece by piece: the line break is the page's own.
        let tip = match &f.diff {
            Some((_, t, _)) => format!("{}\n{}", esc(&f.name), esc(t)),
            None => format!(
                "{}\ncalls {}, total {} ms ({share}), self {} ms",
                esc(&f.name),
                f.calls,
                ms(f.total_ns),
                ms(f.self_ns)
            ),
        };
        writeln!(
            out,
            "<g class=\"f\" id=\"f{i}\" data-i=\"{i}\" data-x=\"{}\" data-w=\"{}\" data-d=\"{}\" data-n=\"{}\" data-l=\"{}\" data-c=\"{}\" data-t=\"{}\" data-s=\"{}\" data-ft=\"{}\"{fill_calls}{change}><title>{}</title><rect x=\"{x:.3}\" y=\"{y}\" width=\"{w:.3}\" height=\"{}\" fill=\"{}\"/><text x=\"{:.3}\" y=\"{}\">{}</text></g>",
            f.x,
            f.w,
            f.depth,
            esc(&f.name),
            esc(&f.label),
            f.calls,
            f.total_ns,
            f.self_ns,
            f.fill,
            tip,
            ROW - 1,
            f.fill,
            x + 3.0,
            y + ROW - 5,
            esc(&fit(&f.label, w)),
        )?;
    }
    write!(
        out,
        "</svg></section>\n<section id=\"tree\"><h2>Call tree</h2>\n"
    )?;
    call_tree(page, out)?;
    write!(
        out,
        "</section></main>\n<script>{SCRIPT}</script>\n</body></html>\n"
    )
}

/// The call tree as nested `<details>`, each line naming its frame.
fn call_tree(page: &Page, out: &mut dyn Write) -> io::Result<()> {
    let mut open: Vec<usize> = Vec::new();
    for (i, f) in page.frames.iter().enumerate() {
        while open.last().is_some_and(|&d| d >= f.depth) {
            open.pop();
            out.write_all(b"</details>\n")?;
        }
        let (short, figures) = match &f.diff {
            Some((_, t, short)) => (short.clone(), esc(t)),
            None => (
                percent(f.w, page.total),
                format!(
                    "{} ms · self {} ms · {} calls",
                    ms(f.total_ns),
                    ms(f.self_ns),
                    f.calls
                ),
            ),
        };
        writeln!(
            out,
            "<details{}><summary data-f=\"{i}\" title=\"{name}\"><span class=\"pct\">{short}</span> <b>{name}</b> <span class=\"fig\">{figures}</span></summary>",
            if f.depth < 2 { " open" } else { "" },
            name = esc(&f.name),
        )?;
        open.push(f.depth);
    }
    for _ in open {
        out.write_all(b"</details>\n")?;
    }
    Ok(())
}

const STYLE: &str = r#"
body{margin:0;font:13px/1.35 system-ui,sans-serif;color:#222;background:#fff}
header{padding:8px 12px;border-bottom:1px solid #ddd}
h1{font-size:16px;margin:0}h2{font-size:14px;margin:4px 0}
.sub{margin:2px 0;color:#555}
.bar{display:flex;gap:10px;align-items:center;margin:6px 0}
#status{margin:2px 0;font-family:monospace;white-space:pre;overflow:hidden;text-overflow:ellipsis}
main{display:grid;grid-template-columns:minmax(0,5fr) minmax(0,2fr);gap:8px;padding:8px}
#graph{overflow:auto}#tree{overflow:auto;max-height:85vh;font-size:12px;border-left:1px solid #ddd;padding-left:8px}
svg text{font:11px monospace;pointer-events:none;fill:#000}
g.f rect{stroke:#fff;stroke-width:0.5;cursor:pointer}
g.f:hover rect{stroke:#000}
g.f.m rect{fill:#d040ff}
g.f.h{display:none}
details details{margin-left:14px}
summary{cursor:pointer;white-space:nowrap}.fig{color:#555}.pct{display:inline-block;min-width:4.5em;text-align:right;color:#333}
summary.m b{background:#f0c0ff}
main.whole{grid-template-columns:minmax(0,3fr) minmax(0,4fr)}
main.whole summary{white-space:normal;overflow-wrap:anywhere}
"#;

const SCRIPT: &str = r#"
(function(){
const CW=7,MIN=24;
const svg=document.getElementById('fg');
const H=+svg.dataset.height;let W=1200,cur=null;
const frames=Array.from(svg.querySelectorAll('g.f'));
const total=+svg.dataset.total;
const status=document.getElementById('status');
const info=frames.map(g=>({g:g,x:+g.dataset.x,w:+g.dataset.w,d:+g.dataset.d,r:g.querySelector('rect'),t:g.querySelector('text')}));
function fit(l,w){if(w<MIN)return'';const room=Math.floor((w-6)/CW);if(l.length<=room)return l;return room<=2?'':l.slice(0,room-2)+'..';}
function draw(x0,w0,d0){const k=w0>0?W/w0:0;for(const f of info){let nx,nw;
 if(f.d<d0){if(f.x<=x0&&f.x+f.w>=x0+w0){nx=0;nw=W;}else{f.g.classList.add('h');continue;}}
 else if(f.x>=x0&&f.x+f.w<=x0+w0){nx=(f.x-x0)*k;nw=f.w*k;}else{f.g.classList.add('h');continue;}
 f.g.classList.remove('h');f.r.setAttribute('x',nx.toFixed(3));f.r.setAttribute('width',nw.toFixed(3));
 f.t.setAttribute('x',(nx+3).toFixed(3));f.t.textContent=fit(f.g.dataset.l,nw);}}
function zoom(i){const f=info[i];if(!f)return;cur=i;draw(f.x,f.w,f.d);}
function reset(){cur=null;draw(0,total,0);}
function fitWidth(){W=Math.max(200,svg.parentNode.clientWidth||1200);svg.setAttribute('viewBox','0 0 '+W+' '+H);svg.setAttribute('width',W);if(cur===null)reset();else zoom(cur);}
window.addEventListener('resize',fitWidth);
function ms(ns){return (ns/1e6).toFixed(3);}
function pct(v){return total>0?(v*100/total).toFixed(1)+'%':'-';}
function show(g){const d=g.dataset;status.textContent=d.ch?d.n+'  '+d.ch:d.n+'  calls '+d.c+', total '+ms(+d.t)+' ms ('+pct(+d.t)+'), self '+ms(+d.s)+' ms';}
svg.addEventListener('click',e=>{const g=e.target.closest('g.f');if(g)zoom(+g.dataset.i);});
svg.addEventListener('mouseover',e=>{const g=e.target.closest('g.f');if(g)show(g);});
document.getElementById('reset').addEventListener('click',reset);
document.addEventListener('keydown',e=>{if(e.key==='Escape')reset();});
document.getElementById('tree').addEventListener('click',e=>{const s=e.target.closest('summary');if(s&&s.dataset.f!==undefined){zoom(+s.dataset.f);show(frames[+s.dataset.f]);}});
const search=document.getElementById('search'),matched=document.getElementById('matched');
search.addEventListener('input',()=>{let re=null;try{re=search.value?new RegExp(search.value):null;}catch(err){matched.textContent='not a regular expression';return;}
 let sum=0,end=-1;for(const f of info){const m=!!re&&re.test(f.g.dataset.n);f.g.classList.toggle('m',m);
 if(m&&f.x>=end){sum+=f.w;end=f.x+f.w;}}
 document.querySelectorAll('#tree summary').forEach(s=>s.classList.toggle('m',!!re&&frames[+s.dataset.f]&&re.test(frames[+s.dataset.f].dataset.n)));
 matched.textContent=re?'matched '+pct(sum)+' of the total':'';});
const bycalls=document.getElementById('bycalls');
const whole=document.getElementById('whole'),main=document.querySelector('main');
function setWhole(on){whole.checked=on;main.classList.toggle('whole',on);fitWidth();}
whole.addEventListener('change',()=>setWhole(whole.checked));
fitWidth();
if(location.hash==='#whole-names')setWhole(true);
if(bycalls)bycalls.addEventListener('change',()=>{for(const f of info){f.r.setAttribute('fill',bycalls.checked?f.g.dataset.fc:f.g.dataset.ft);}});
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{MethodInfo, Node, ThreadProfile, Tree};

    /// root(100) -> a(60) -> c(10); root -> b(30); times in ns, 1 GHz ticks.
    fn sample() -> Profile {
        let mut p = Profile::new(1_000_000_000);
        for (id, name) in [(1, "root"), (2, "a"), (3, "b"), (4, "c")] {
            p.methods.insert(id, MethodInfo::new("x.Y", name, "()V"));
        }
        p.methods
            .insert(5, MethodInfo::new("x.Z", "<init>", "(Ljava/lang/String;)V"));
        let mut t = Tree::default();
        let leaf = |method, calls, total| Node {
            method,
            calls,
            total_ticks: total,
            ..Node::default()
        };
        let r = t.push(None, leaf(1, 1, 100));
        let a = t.push(Some(r), leaf(2, 2, 60));
        t.push(Some(a), leaf(4, 5, 10));
        t.push(Some(r), leaf(3, 1, 30));
        t.push(Some(r), leaf(5, 1, 0));
        t.recount();
        p.threads.push(ThreadProfile {
            virtual_threads: 0,
            index: 0,
            name: "main\u{1b}[31m".into(),
            tree: t,
            ..ThreadProfile::default()
        });
        p
    }

    fn render(p: &Profile, opts: &RenderOptions) -> String {
        let mut out = Vec::new();
        FlameGraph.render(p, opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// (name, x, w, depth) of every frame, from the page's attributes.
    fn frames(html: &str) -> Vec<(String, u64, u64, usize)> {
        html.split("<g class=\"f\"")
            .skip(1)
            .map(|g| {
                let attr = |k: &str| {
                    let at = g.find(&format!(" data-{k}=\"")).unwrap() + k.len() + 8;
                    g[at..at + g[at..].find('"').unwrap()].to_owned()
                };
                (
                    attr("n"),
                    attr("x").parse().unwrap(),
                    attr("w").parse().unwrap(),
                    attr("d").parse().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn every_node_is_a_frame_as_wide_as_its_total_beside_its_siblings() {
        let html = render(&sample(), &RenderOptions::default());
        let f = frames(&html);
        assert_eq!(
            f,
            vec![
                ("x.Y.root()V".to_owned(), 0, 100, 0),
                ("x.Y.a()V".to_owned(), 0, 60, 1),
                ("x.Y.c()V".to_owned(), 0, 10, 2),
                ("x.Y.b()V".to_owned(), 60, 30, 1),
                ("x.Z.&lt;init&gt;(Ljava/lang/String;)V".to_owned(), 90, 0, 1),
            ]
        );
        assert!(html.contains("data-total=\"100\""));
        // Widths in SVG units: 1200 for the whole, 720 for a (60%).
        assert!(html.contains("width=\"1200.000\""), "{html}");
        assert!(html.contains("width=\"720.000\""));
        assert!(html.contains("<title>x.Y.a()V\ncalls 2, total 0.000 ms (60.0%)"));
    }

    #[test]
    fn the_page_is_self_contained() {
        let html = render(&sample(), &RenderOptions::default());
        for needle in [
            "<script src",
            "<link",
            "@import",
            "url(",
            "https://",
            "fetch(",
        ] {
            assert!(!html.contains(needle), "{needle} in the page");
        }
        // The SVG namespace is an identifier, never fetched.
        assert_eq!(html.matches("http://").count(), 1);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
    }

    #[test]
    fn thread_frames_put_each_thread_under_its_name_and_escape_it() {
        let opts = RenderOptions {
            thread_frames: true,
            ..RenderOptions::default()
        };
        let html = render(&sample(), &opts);
        let f = frames(&html);
        assert_eq!(f[0], ("main\\x1b[31m".to_owned(), 0, 100, 0));
        assert_eq!(f[1].3, 1);
        assert!(!html.contains('\u{1b}'));
    }

    #[test]
    fn thresholds_and_depth_apply_as_in_the_other_reports() {
        let opts = RenderOptions {
            max_depth: Some(2),
            min_percent: 20.0,
            ..RenderOptions::default()
        };
        let names: Vec<String> = frames(&render(&sample(), &opts))
            .into_iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(names, ["x.Y.root()V", "x.Y.a()V", "x.Y.b()V"]);
    }

    #[test]
    fn the_call_tree_nests_like_the_graph() {
        let html = render(&sample(), &RenderOptions::default());
        let tree = &html[html.find("<section id=\"tree\">").unwrap()..];
        assert_eq!(tree.matches("<details").count(), 5);
        assert_eq!(tree.matches("</details>").count(), 5);
        let a = tree.find("x.Y.a()V").unwrap();
        let c = tree.find("x.Y.c()V").unwrap();
        let b = tree.find("x.Y.b()V").unwrap();
        assert!(a < c && c < b);
        // c's details closes before b's opens.
        assert!(tree[c..b].contains("</details>\n</details>"));
    }

    #[test]
    fn the_subtitle_says_how_the_profile_was_timed() {
        let html = render(&sample(), &RenderOptions::default());
        assert!(html.contains("ms exact total · widths: exact total time"));
        let mut p = sample();
        p.timing = crate::profile::Timing::Sampled;
        let html = render(&p, &RenderOptions::default());
        assert!(html.contains("ms sampled total · widths: sampled total time"));
        assert!(!html.contains("exact total"));
    }

    #[test]
    fn labels_fit_their_frames() {
        assert_eq!(fit("Service::handle", 1200.0), "Service::handle");
        assert_eq!(fit("Service::handle", 60.0), "Servi..");
        assert_eq!(fit("Service::handle", 10.0), "");
        assert_eq!(short_label("com.acme.Service", "handle"), "Service::handle");
    }

    #[test]
    fn differential_colours_follow_the_change() {
        assert_eq!(diverging(0.0, 10.0), "rgb(235,235,235)");
        assert_eq!(diverging(10.0, 10.0), "rgb(255,0,0)");
        assert_eq!(diverging(-10.0, 10.0), "rgb(0,0,255)");
        let slight = diverging(1.0, 100.0);
        assert!(slight.starts_with("rgb(255,2"), "{slight}");
        assert_eq!(change_text(100, 150), "+50.0%");
        assert_eq!(change_text(0, 5), "new");
        assert_eq!(change_text(5, 0), "gone");
    }

    #[test]
    fn a_diff_is_drawn_with_the_second_profiles_widths() {
        let a = sample();
        let mut b = sample();
        // b: a() takes 80 instead of 60, root 120.
        let t = &mut b.threads[0].tree;
        t.nodes[0].total_ticks = 120;
        t.nodes[1].total_ticks = 80;
        let d = crate::cct::diff::diff(&a, &b);
        let mut out = Vec::new();
        DiffFlameGraph
            .render(&d, &RenderOptions::default(), &mut out)
            .unwrap();
        let html = String::from_utf8(out).unwrap();
        let f = frames(&html);
        assert_eq!(f[0], ("x.Y.root()V".to_owned(), 0, 120, 0));
        assert_eq!(f[1], ("x.Y.a()V".to_owned(), 0, 80, 1));
        // a got slower: red; c (unchanged) neutral.
        let a_frame = &html[html.find("data-n=\"x.Y.a()V\"").unwrap()..];
        assert!(a_frame.contains("data-ft=\"rgb(255,"), "{a_frame}");
        let c_frame = &html[html.find("data-n=\"x.Y.c()V\"").unwrap()..];
        assert!(c_frame.contains("data-ft=\"rgb(235,235,235)\""));
        assert!(html.contains("id=\"bycalls\""));
        assert!(
            html.contains("0.000 → 0.000 ms (+0.000 ms, +33.3%)"),
            "{html}"
        );
    }
}
