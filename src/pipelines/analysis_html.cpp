#include "pipelines/analysis_html.h"

namespace qforge::pipelines {

namespace {

// The page's style: system fonts only, so the file needs nothing from the network.
constexpr const char* kStyle = R"css(
:root { --ink: #1d2330; --muted: #667085; --line: #d9dee7; --panel: #f6f8fb; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; color: var(--ink); background: #fff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 32px 0 8px; padding-bottom: 4px;
  border-bottom: 1px solid var(--line); }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 12.5px; }
.muted, .sub { color: var(--muted); }
.sub { font-size: 12px; }
.note { color: var(--muted); font-size: 12.5px; margin: 4px 0 10px; max-width: 80em; }
#model { font-size: 15px; overflow-wrap: anywhere; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; word-break: break-word; }
.cards { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 14px; }
.card h3 { font-size: 13px; margin: 0 0 6px; color: var(--muted); font-weight: 600; }
table { border-collapse: collapse; }
th, td { padding: 4px 8px; text-align: left; vertical-align: top; }
thead th { background: var(--panel); border-bottom: 1px solid var(--line); font-weight: 600; }
tbody td { border-bottom: 1px solid var(--line); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.summary td.num { font-size: 16px; font-weight: 600; }
th button { all: unset; cursor: pointer; display: inline-block; max-width: 7.5em;
  white-space: normal; }
th[data-key=rank] button { white-space: nowrap; }
th button:focus-visible { outline: 2px solid #4b7bec; }
th[aria-sort=ascending] button::after { content: " \25B2"; font-size: 10px; }
th[aria-sort=descending] button::after { content: " \25BC"; font-size: 10px; }
.quantizers { width: 100%; font-size: 13px; }
.table-wrap { overflow-x: auto; }
.quantizers td.col-name { overflow-wrap: break-word; min-width: 13em; max-width: 22em; }
.quantizers td.col-suggestions { min-width: 16em; max-width: 32em; }
.quantizers thead th { vertical-align: bottom; }
.quantizers td.col-rank { font-weight: 700; border-left: 6px solid transparent; }
.suggestions { margin: 0; padding-left: 16px; }
.suggestions .fix { font-weight: 600; }
.suggestions code { display: block; color: var(--muted); overflow-wrap: anywhere; }
.legend { display: inline-flex; align-items: center; gap: 8px; font-size: 12px;
  color: var(--muted); }
.legend .scale { width: 160px; height: 10px; border-radius: 3px;
  background: linear-gradient(to right, hsl(120,70%,50%), hsl(60,70%,50%), hsl(0,70%,50%)); }
.charts { display: flex; flex-wrap: wrap; gap: 24px; }
.charts figure, .histograms figure { margin: 0; }
figcaption { font-size: 13px; font-weight: 600; margin-bottom: 4px; }
svg text { font-size: 11px; fill: var(--ink); }
svg .axis text, svg text.tick { fill: var(--muted); font-size: 10px; }
svg .grid { stroke: #e8ebf0; }
svg .zero { stroke: #98a2b3; }
svg .infinite { stroke: #1d2330; stroke-dasharray: 3 2; }
.histograms { display: grid; grid-template-columns: repeat(auto-fill, minmax(310px, 1fr));
  gap: 16px; }
.histograms figure { border: 1px solid var(--line); border-radius: 8px; padding: 8px; }
.histograms figcaption { overflow-wrap: break-word; }
.range-facts { display: grid; grid-template-columns: repeat(4, auto); gap: 0 10px;
  font-size: 11.5px; margin: 4px 0 0; }
.range-facts dt { color: var(--muted); }
.range-facts dd { margin: 0; font-variant-numeric: tabular-nums; }
svg .range-mark.min, svg .range-mark.max { stroke: #1d2330; stroke-width: 1.5; }
svg .range-mark.p0_1, svg .range-mark.p99_9 { stroke: #e8590c; stroke-width: 1.5;
  stroke-dasharray: 4 2; }
svg .hist-bin { fill: #5b7db1; }
svg .target-line { stroke: #d63939; stroke-width: 1.5; stroke-dasharray: 6 3; }
svg .float-line { stroke: #667085; stroke-width: 1; stroke-dasharray: 2 3; }
svg .trial-path { fill: none; stroke: #4b7bec; stroke-width: 2; }
svg .trial-point { fill: #4b7bec; stroke: #fff; stroke-width: 1.5; }
svg .trial-point.best { fill: #2f9e44; stroke: #1d2330; }
tr.trial-row.best td, tr.mp-trial-row.best td { background: #e6f4ea; font-weight: 600; }
svg .budget-line { stroke: #d63939; stroke-width: 1.5; stroke-dasharray: 6 3; }
svg .uniform-path { fill: none; stroke: #98a2b3; stroke-width: 2; }
svg .mp-point { fill: #98a2b3; stroke: #fff; stroke-width: 1.5; }
svg .mp-point.chosen { fill: #2f9e44; stroke: #1d2330; }
.mp-units { font-size: 13px; margin-top: 16px; }
.mp-units td.chosen { background: #e6f4ea; font-weight: 600; }
.met { color: #2f9e44; font-weight: 700; }
.not-met { color: #d63939; font-weight: 700; }
#render-error { color: #b42318; background: #fef3f2; padding: 12px; white-space: pre-wrap; }
)css";

// The page's script: reads the embedded JSON and draws everything. Elements are built one by one
// (textContent, setAttribute), never from markup, so no string of the report is parsed as HTML.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  const SVG_NS = 'http://www.w3.org/2000/svg';
  // JSON has no infinity: an SQNR of identical outputs comes as null or as a huge number.
  const HUGE = 1e300;

  const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
  const asObj = (x) => (isObj(x) ? x : null);
  const asArr = (x) => (Array.isArray(x) ? x : []);
  const asNum = (x) => (typeof x === 'number' && isFinite(x) ? x : null);
  const asStr = (x) =>
    typeof x === 'string' ? x : typeof x === 'number' || typeof x === 'boolean' ? String(x) : null;
  // Names and labels: an empty string is as good as absent.
  const label = (x) => (asStr(x) === '' ? null : asStr(x));

  // A figure: v is what is drawn (Infinity for identical outputs, null when absent), raw the
  // JSON number it came from (data-value shows it in full).
  const fig = (v, raw) => ({v: v, raw: raw});
  const NONE = fig(null, null);
  const numFig = (x) => fig(asNum(x), asNum(x));
  function dbFig(x) {
    if (typeof x !== 'number' || isNaN(x)) return NONE;
    return fig(x >= HUGE ? Infinity : x <= -HUGE ? -Infinity : x, x);
  }
  // In a measurement that was made, a null SQNR means the outputs were identical.
  function measuredDb(m) {
    if (!m || !('sqnr_db' in m)) return NONE;
    return m.sqnr_db === null ? fig(Infinity, null) : dbFig(m.sqnr_db);
  }
  const dataValue = (f) => (typeof f.raw === 'number' ? String(f.raw) : String(f.v));

  function fixed(v, digits) {
    if (v === null) return '\u2014';
    if (v === Infinity) return '\u221e';
    if (v === -Infinity) return '\u2212\u221e';
    return v.toFixed(digits);
  }
  const fmtDb = (f) => fixed(f.v, 2);
  const fmtCos = (f) => fixed(f.v, 6);
  function fmtSci(f) {
    if (f.v === null) return '\u2014';
    return f.v === 0 ? '0' : f.v.toExponential(2);
  }
  const fmtShort = (v) => (v === null ? '\u2014' : String(Number(v.toPrecision(4))));
  const dbTitle = (f) => (f.v === Infinity ? 'identical outputs' : null);

  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const k of Object.keys(attrs)) {
      const v = attrs[k];
      if (v !== null && v !== undefined) e.setAttribute(k, String(v));
    }
  }
  function append(e, children) {
    if (children === null || children === undefined) return;
    for (const c of Array.isArray(children) ? children : [children]) {
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
  }
  function h(tag, attrs, children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }
  function s(tag, attrs, children) {
    const e = document.createElementNS(SVG_NS, tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }
  const svgTitle = (text) => s('title', null, text);
  // Long dotted names wrap after a separator (<wbr> leaves textContent as it is).
  const breakable = (text) =>
    text.split(/(?<=[.\/:])/).flatMap((part, i) => (i ? [h('wbr'), part] : [part]));
  const clip = (text, n) => (text.length > n ? text.slice(0, n - 1) + '\u2026' : text);
  function figText(f, fmt, cls, id) {
    return h('span', {id: id, class: cls, 'data-value': f.v === null ? null : dataValue(f),
                      title: dbTitle(f)}, fmt(f));
  }

  // Green (harmless) to red (most harmful); grey when the figure is absent.
  const heat = (t, light) => (t === null ? 'hsl(0,0%,' + light + '%)' :
                              'hsl(' + Math.round(120 * (1 - t)) + ',70%,' + light + '%)');

  // Ticks at 1, 2 or 5 times a power of ten, and the domain widened to them.
  function niceScale(lo, hi, count) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const r = raw / mag;
    const step = (r >= 7.5 ? 10 : r >= 3.5 ? 5 : r >= 1.5 ? 2 : 1) * mag;
    const nlo = Math.floor(lo / step + 1e-9) * step, nhi = Math.ceil(hi / step - 1e-9) * step;
    const ticks = [];
    for (let i = 0; nlo + i * step <= nhi + step * 1e-6; ++i) {
      const v = nlo + i * step;
      ticks.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
    }
    return {lo: nlo, hi: nhi > nlo ? nhi : nlo + step, ticks: ticks};
  }
  const tickText = (v) => String(Number(v.toPrecision(6)));

  // A chart's horizontal grid lines and their labels on the left, into `axis`.
  function yGrid(axis, ticks, y, left, width) {
    for (const t of ticks) {
      axis.appendChild(s('line', {class: 'grid', x1: left, x2: left + width, y1: y(t), y2: y(t)}));
      axis.appendChild(s('text', {class: 'tick', x: left - 6, y: y(t) + 3, 'text-anchor': 'end'},
                         tickText(t)));
    }
  }

  function quantizerView(q, index, allOn) {
    const iso = asObj(q.isolated), loo = asObj(q.leave_one_out), range = asObj(q.range);
    const hist = range ? asObj(range.histogram) : null;
    let gain = loo ? dbFig(loo.gain_db) : NONE;
    // Leaving out the only noisy quantizer leaves identical outputs: an infinite gain.
    if (loo && gain.v === null && loo.gain_db === null && measuredDb(loo).v === Infinity &&
        allOn.v !== null && isFinite(allOn.v)) {
      gain = fig(Infinity, null);
    }
    return {
      index: index,
      name: asStr(q.name) || '#' + (index + 1),
      kind: label(q.kind), value: label(q.value), unit: label(q.unit), op: label(q.op),
      bits: asNum(q.bits), signed: typeof q.signed === 'boolean' ? q.signed : null,
      granularity: label(q.granularity), observer: label(q.observer),
      rank: asNum(q.rank),
      hasIsolated: !!iso && 'sqnr_db' in iso,
      isolated: iso ? measuredDb(iso) : NONE,
      isolatedCos: iso ? numFig(iso.cosine) : NONE,
      loo: loo ? measuredDb(loo) : NONE,
      hasGain: gain.v !== null,
      gain: gain,
      fisher: numFig(q.fisher),
      local: dbFig(q.local_sqnr_db),
      accumulated: dbFig(q.accumulated_sqnr_db),
      range: range,
      hist: hist,
      suggestions: asArr(q.suggestions).map(asObj).filter(Boolean),
      t: null,
    };
  }

  // Each quantizer's place between the least (0) and the most (1) harmful, by the figure the
  // ranking used (else the first one the report has).
  function placeSensitivity(qs, rankingBy) {
    const scores = {
      leave_one_out: (q) => q.gain.v,
      isolated: (q) => (q.isolated.v === null ? null : -q.isolated.v),
      fisher: (q) => (q.fisher.v === null || q.fisher.v < 0 ? null :
                      q.fisher.v === 0 ? -Infinity : Math.log10(q.fisher.v)),
    };
    let by = scores[rankingBy] ? rankingBy : null;
    if (!by) by = Object.keys(scores).find((k) => qs.some((q) => scores[k](q) !== null)) || null;
    if (!by) return null;
    const values = qs.map(scores[by]);
    const finite = values.filter((x) => x !== null && isFinite(x));
    const lo = Math.min(...finite), hi = Math.max(...finite);
    qs.forEach((q, i) => {
      const x = values[i];
      if (x === null) return;
      q.t = x === Infinity ? 1 : x === -Infinity ? 0 : hi > lo ? (x - lo) / (hi - lo) : 0.5;
    });
    return by;
  }

  const byRank = (a, b) =>
    (a.rank === null) - (b.rank === null) || (a.rank || 0) - (b.rank || 0) || a.index - b.index;

  function header(rep, allOn, allOnCos) {
    const root = h('header', {id: 'summary'});
    root.appendChild(h('h1', null, 'qforge ' + (asStr(rep.command) || 'analyze')));
    root.appendChild(h('div', null, h('code', {id: 'model'}, asStr(rep.model) || '\u2014')));
    const facts = h('dl', {class: 'facts'});
    const cal = asObj(rep.calibration);
    const rows = [
      ['Backend', asStr(rep.backend)],
      ['Analysis data', asStr(rep.data)],
      ['Analysis samples', asStr(asNum(rep.samples))],
      ['Calibration data', cal ? asStr(cal.data) : null],
      ['Calibration samples', cal ? asStr(asNum(cal.samples)) : null],
      ['Outputs', asArr(rep.outputs).map(asStr).filter((x) => x !== null).join(', ') || null],
      ['Analysis time', asNum(rep.seconds) === null ? null : rep.seconds.toFixed(1) + ' s'],
    ];
    for (const [k, v] of rows) {
      if (v === null) continue;
      facts.appendChild(h('dt', null, k));
      facts.appendChild(h('dd', {class: 'fact-' + k.toLowerCase().replace(/ /g, '-')}, v));
    }
    root.appendChild(facts);

    const cards = h('div', {class: 'cards'});
    const table = h('table', {class: 'summary'});
    table.appendChild(h('thead', null, h('tr', null, [
      h('th', null, 'whole model'), h('th', {class: 'num'}, 'float'),
      h('th', {class: 'num'}, 'quantized'), h('th', {class: 'num'}, 'change')])));
    const body = h('tbody');
    body.appendChild(h('tr', null, [
      h('td', null, 'SQNR vs float (dB)'), h('td', {class: 'num muted'}, 'reference'),
      h('td', {class: 'num'}, figText(allOn, fmtDb, null, 'quantized-sqnr')), h('td')]));
    body.appendChild(h('tr', null, [
      h('td', null, 'cosine vs float'), h('td', {class: 'num muted'}, '1'),
      h('td', {class: 'num'}, figText(allOnCos, fmtCos, null, 'quantized-cosine')), h('td')]));
    const task = asObj(rep.task);
    if (task) {
      const f = numFig(task.float), qz = numFig(task.quantized);
      const d = f.v !== null && qz.v !== null ? fig(qz.v - f.v, null) : NONE;
      const sign = d.v !== null && d.v > 0 ? '+' : '';
      body.appendChild(h('tr', null, [
        h('td', null, asStr(task.metric) || 'task metric'),
        h('td', {class: 'num'}, figText(f, fmtDb, null, 'task-float')),
        h('td', {class: 'num'}, figText(qz, fmtDb, null, 'task-quantized')),
        h('td', {class: 'num'},
          h('span', {id: 'task-delta', 'data-value': d.v === null ? null : String(d.v)},
            d.v === null ? '\u2014' : sign + d.v.toFixed(2)))]));
    }
    table.appendChild(body);
    cards.appendChild(h('div', {class: 'card'}, [h('h3', null, 'Every quantizer on'), table]));

    const ranking = h('div', {class: 'card'}, h('h3', null, 'Ranking'));
    const rankingBy = asStr(rep.ranking_by);
    const byText = {leave_one_out: 'leave-one-out SQNR gain', isolated: 'isolated SQNR',
                    fisher: 'Fisher (predicted output noise)'};
    ranking.appendChild(h('div', null, ['by ', h('b', {id: 'ranking-by'},
      rankingBy === null ? '\u2014' : byText[rankingBy] || rankingBy)]));
    const agreement = asObj(rep.rankings_agreement);
    if (agreement) {
      const dl = h('dl', {class: 'facts'});
      for (const k of Object.keys(agreement)) {
        const v = numFig(agreement[k]);
        dl.appendChild(h('dt', null, k.replace(/_vs_/g, ' vs ').replace(/_/g, '-')));
        dl.appendChild(h('dd', null, h('span', {class: 'agreement', 'data-key': k,
                                               'data-value': v.v === null ? null : String(v.v)},
                                         v.v === null ? '\u2014' : v.v.toFixed(3))));
      }
      ranking.appendChild(h('div', {class: 'sub'}, 'agreement between rankings (Spearman)'));
      ranking.appendChild(dl);
    }
    cards.appendChild(ranking);
    root.appendChild(cards);
    return root;
  }

  function suggestionsCell(q) {
    if (!q.suggestions.length) return null;
    return h('ul', {class: 'suggestions'}, q.suggestions.map((sg) => h('li', null, [
      h('span', {class: 'fix'}, asStr(sg.fix) || '?'),
      asStr(sg.why) === null ? null : ': ' + asStr(sg.why),
      label(sg.flag) === null ? null : h('code', {title: 'command-line flag'}, label(sg.flag)),
      isObj(sg.override) ? h('code', {title: 'override for the quantization config'},
                             JSON.stringify(sg.override)) : null])));
  }

  function quantizerTable(qs, rankingBy) {
    const section = h('section', {id: 'quantizers'});
    section.appendChild(h('h2', null, 'Quantizers'));
    section.appendChild(h('p', {class: 'note'}, [
      'Isolated SQNR: the model output with only this quantizer on. Leave-one-out gain: the ' +
      'output SQNR with every quantizer on but this one, minus the SQNR with all on. Fisher: the ' +
      'output noise power predicted from gradients. Local / accumulated SQNR: at the quantized ' +
      'value, with only this quantizer / with every quantizer up to it on. Click a heading to ' +
      'sort. ',
      h('span', {class: 'legend'}, ['harmless', h('span', {class: 'scale'}), 'most harmful' +
        (rankingBy ? ' (by ' + rankingBy.replace(/_/g, '-') + ')' : '')])]));
    const text = (get) => (q) => get(q) === null ? '\u2014' : get(q);
    const figure = (get, fmt) => ({fig: get, fmt: fmt, num: true, sort: (q) => get(q).v});
    const columns = [
      {key: 'rank', label: '#', num: true, sort: (q) => q.rank,
       cell: (q) => (q.rank === null ? '\u2014' : String(q.rank))},
      {key: 'name', label: 'Quantizer', sort: (q) => q.name, cell: (q) => [
        h('span', {class: 'qname mono'}, breakable(q.name)),
        h('div', {class: 'sub'}, [q.value, q.unit === null ? null : 'unit ' + q.unit]
                                     .filter((x) => x !== null).join(' \u00b7 ') || null)]},
      {key: 'kind', label: 'Kind', sort: (q) => q.kind, cell: text((q) => q.kind)},
      {key: 'op', label: 'Op', sort: (q) => q.op, cell: text((q) => q.op)},
      {key: 'bits', label: 'Bits', num: true, sort: (q) => q.bits,
       cell: (q) => q.bits === null ? '\u2014' :
                    (q.signed === null ? '' : q.signed ? 'int' : 'uint') + String(q.bits)},
      {key: 'granularity', label: 'Granularity', sort: (q) => q.granularity,
       cell: text((q) => q.granularity)},
      {key: 'observer', label: 'Observer', sort: (q) => q.observer, cell: text((q) => q.observer)},
      Object.assign({key: 'isolated', label: 'Isolated SQNR (dB)'},
                    figure((q) => q.isolated, fmtDb)),
      Object.assign({key: 'gain', label: 'Leave-one-out gain (dB)'}, figure((q) => q.gain, fmtDb)),
      Object.assign({key: 'fisher', label: 'Fisher'}, figure((q) => q.fisher, fmtSci)),
      Object.assign({key: 'local', label: 'Local SQNR (dB)'}, figure((q) => q.local, fmtDb)),
      Object.assign({key: 'accumulated', label: 'Accum. SQNR (dB)'},
                    figure((q) => q.accumulated, fmtDb)),
      {key: 'suggestions', label: 'Suggestions', cell: suggestionsCell},
    ];
    const table = h('table', {class: 'quantizers'});
    const headRow = h('tr');
    table.appendChild(h('thead', null, headRow));
    const tbody = h('tbody');
    table.appendChild(tbody);
    for (const q of qs) {
      const row = h('tr', {class: 'quantizer-row', 'data-quantizer': q.name, 'data-rank': q.rank,
                           'data-kind': q.kind});
      row.style.background = heat(q.t, 94);
      for (const c of columns) {
        const td = h('td', {class: 'col-' + c.key + (c.num ? ' num' : '')});
        if (c.fig) {
          const f = c.fig(q);
          setAttrs(td, {'data-value': f.v === null ? null : dataValue(f), title: dbTitle(f)});
          td.textContent = c.fmt(f);
        } else {
          append(td, c.cell(q));
        }
        if (c.key === 'rank') td.style.borderLeftColor = heat(q.t, 50);
        row.appendChild(td);
      }
      q.row = row;
      tbody.appendChild(row);
    }
    let sortKey = 'rank', sortDir = 1;
    function sortRows() {
      const col = columns.find((c) => c.key === sortKey);
      const order = qs.slice().sort((a, b) => {
        const x = col.sort(a), y = col.sort(b);
        if (x === null || y === null) return (x === null) - (y === null) || a.index - b.index;
        return x < y ? -sortDir : x > y ? sortDir : a.index - b.index;
      });
      for (const q of order) tbody.appendChild(q.row);
      for (const th of headRow.children) {
        th.setAttribute('aria-sort', th.dataset.key === sortKey ?
                                         (sortDir > 0 ? 'ascending' : 'descending') : 'none');
      }
    }
    for (const c of columns) {
      const th = h('th', {'data-key': c.key, class: c.num ? 'num' : null});
      if (c.sort) {
        const button = h('button', {type: 'button'}, c.label);
        button.addEventListener('click', () => {
          sortDir = sortKey === c.key ? -sortDir : 1;
          sortKey = c.key;
          sortRows();
        });
        th.appendChild(button);
      } else {
        th.textContent = c.label;
      }
      headRow.appendChild(th);
    }
    sortRows();
    section.appendChild(h('div', {class: 'table-wrap'}, table));
    return section;
  }

  // Horizontal bars, one per row, from zero; infinite values reach the end, dashed.
  function barChart(id, cls, rows) {
    const W = 640, labelW = 200, valueW = 56, rowH = 17, top = 26, bottom = 8;
    const H = top + rows.length * rowH + bottom;
    const finite = rows.map((r) => r.f.v).filter((v) => isFinite(v));
    const sc = niceScale(Math.min(0, ...finite), Math.max(0, ...finite), 5);
    const x = (v) => labelW + ((Math.max(sc.lo, Math.min(sc.hi, v)) - sc.lo) / (sc.hi - sc.lo)) *
                             (W - labelW - valueW);
    const svg = s('svg', {id: id, class: 'bar-chart', width: W, height: H,
                          viewBox: '0 0 ' + W + ' ' + H, role: 'img'});
    const axis = s('g', {class: 'axis'});
    for (const t of sc.ticks) {
      axis.appendChild(s('line', {class: 'grid', x1: x(t), x2: x(t), y1: top - 4, y2: H - bottom}));
      axis.appendChild(s('text', {class: 'tick', x: x(t), y: top - 8, 'text-anchor': 'middle'},
                         tickText(t)));
    }
    svg.appendChild(axis);
    rows.forEach((r, i) => {
      const y = top + i * rowH;
      const label = s('text', {x: labelW - 6, y: y + rowH - 5, 'text-anchor': 'end',
                               class: 'bar-name'}, [svgTitle(r.q.name), clip(r.q.name, 30)]);
      svg.appendChild(label);
      const x0 = x(0), x1 = x(r.f.v);
      const rect = s('rect', {class: cls + (isFinite(r.f.v) ? '' : ' infinite'),
                              'data-quantizer': r.q.name, 'data-value': dataValue(r.f),
                              x: Math.min(x0, x1), y: y + 2, width: Math.max(1, Math.abs(x1 - x0)),
                              height: rowH - 5, fill: heat(r.q.t, 52)},
                     svgTitle(r.q.name + ': ' + fmtDb(r.f) + ' dB'));
      svg.appendChild(rect);
      svg.appendChild(s('text', {class: 'bar-label', 'data-quantizer': r.q.name,
                                 x: Math.max(x0, x1) + 4, y: y + rowH - 5}, fmtDb(r.f)));
    });
    svg.appendChild(s('line', {class: 'zero', x1: x(0), x2: x(0), y1: top - 4, y2: H - bottom}));
    return svg;
  }

  function barCharts(qs) {
    const section = h('section', {id: 'bars'});
    section.appendChild(h('h2', null, 'Per-quantizer SQNR'));
    section.appendChild(h('p', {class: 'note'},
        'Most harmful first. Isolated SQNR: lower is worse. Leave-one-out gain: how much the ' +
        'whole model\u2019s SQNR rises when this quantizer alone is turned off; higher is worse.'));
    const ordered = qs.slice().sort(byRank);
    const charts = h('div', {class: 'charts'});
    const iso = ordered.filter((q) => q.hasIsolated).map((q) => ({q: q, f: q.isolated}));
    const gain = ordered.filter((q) => q.hasGain).map((q) => ({q: q, f: q.gain}));
    charts.appendChild(h('figure', null, [h('figcaption', null, 'Isolated SQNR (dB)'),
        iso.length ? barChart('sqnr-chart', 'sqnr-bar', iso) :
                     h('p', {class: 'muted'}, 'No isolated measurements in this report.')]));
    charts.appendChild(h('figure', null, [h('figcaption', null, 'Leave-one-out gain (dB)'),
        gain.length ? barChart('gain-chart', 'gain-bar', gain) :
                      h('p', {class: 'muted'}, 'No leave-one-out measurements in this report.')]));
    section.appendChild(charts);
    return section;
  }

  function histogram(q) {
    const counts = asArr(q.hist.counts).map((c) => Math.max(0, asNum(c) || 0));
    let low = asNum(q.hist.low), high = asNum(q.hist.high);
    if (!counts.length || low === null || high === null) return null;
    if (!(high > low)) { low -= 0.5; high += 0.5; }
    const W = 300, H = 130, L = 8, R = 8, T = 6, B = 18;
    const pw = W - L - R, ph = H - T - B;
    const x = (v) => L + ((Math.max(low, Math.min(high, v)) - low) / (high - low)) * pw;
    const maxLog = Math.log1p(Math.max(...counts)) || 1;
    const svg = s('svg', {class: 'histogram', 'data-quantizer': q.name, width: W, height: H,
                          viewBox: '0 0 ' + W + ' ' + H, role: 'img'});
    const bw = pw / counts.length;
    counts.forEach((c, i) => {
      const bh = (Math.log1p(c) / maxLog) * ph;
      svg.appendChild(s('rect', {class: 'hist-bin', 'data-count': c, x: L + i * bw, y: T + ph - bh,
                                 width: Math.max(0.5, bw - 0.5), height: bh},
                        svgTitle(String(c))));
    });
    svg.appendChild(s('line', {class: 'zero', x1: L, x2: W - R, y1: T + ph, y2: T + ph}));
    const marks = [['min', 'min'], ['p0_1', 'p0.1'], ['p99_9', 'p99.9'], ['max', 'max']];
    for (const [key, label] of marks) {
      const v = asNum(q.range[key]);
      if (v === null) continue;
      svg.appendChild(s('line', {class: 'range-mark ' + key, 'data-mark': key,
                                 'data-value': String(v), x1: x(v), x2: x(v), y1: T, y2: T + ph},
                        svgTitle(label + ' = ' + fmtShort(v))));
    }
    svg.appendChild(s('text', {class: 'tick', x: L, y: H - 4}, fmtShort(low)));
    svg.appendChild(s('text', {class: 'tick', x: W - R, y: H - 4, 'text-anchor': 'end'},
                      fmtShort(high)));
    return svg;
  }

  function histograms(qs) {
    const section = h('section', {id: 'histograms'});
    section.appendChild(h('h2', null, 'Ranges'));
    section.appendChild(h('p', {class: 'note'},
        'Histogram of each quantized value (counts on a log scale, most harmful first). Solid ' +
        'lines: min and max; dashed orange: the 0.1th and 99.9th percentiles.'));
    const grid = h('div', {class: 'histograms'});
    for (const q of qs.slice().sort(byRank)) {
      if (!q.hist) continue;
      const svg = histogram(q);
      if (!svg) continue;
      const r = q.range;
      const facts = h('dl', {class: 'range-facts'});
      const items = [['min', asNum(r.min)], ['p0.1', asNum(r.p0_1)], ['p99.9', asNum(r.p99_9)],
                     ['max', asNum(r.max)], ['outliers', asNum(r.outlier_ratio)],
                     ['clipped', asNum(r.clipped_fraction)],
                     ['ch. spread', asNum(r.channel_spread)]];
      for (const [k, v] of items) {
        if (v === null) continue;
        facts.appendChild(h('dt', null, k));
        facts.appendChild(h('dd', {'data-value': String(v)},
                            k === 'clipped' ? fmtShort(v * 100) + ' %' : fmtShort(v)));
      }
      grid.appendChild(h('figure', {class: 'histogram-card'}, [
        h('figcaption', null, [q.rank === null ? null : '#' + q.rank + ' ',
                               h('span', {class: 'mono'}, breakable(q.name)),
                               q.kind === null ? null : h('span', {class: 'sub'}, ' ' + q.kind)]),
        svg, facts]));
    }
    if (!grid.children.length) {
      section.appendChild(h('p', {class: 'muted'}, 'No range histograms in this report.'));
    } else {
      section.appendChild(grid);
    }
    return section;
  }

  function autotune(at) {
    const section = h('section', {id: 'autotune'});
    section.appendChild(h('h2', null, 'Autotune'));
    const metric = asStr(at.metric) || 'metric';
    const target = dbFig(at.target), floatRef = dbFig(at.float), best = asNum(at.best_trial);
    const trials = asArr(at.trials).map(asObj).filter(Boolean).map((t, i) => ({
      trial: asNum(t.trial) === null ? i + 1 : t.trial, change: asStr(t.change),
      metric: dbFig(t.metric), drop: dbFig(t.drop), float_units: asNum(t.float_units),
      wide_units: asNum(t.wide_units), avg_weight_bits: asNum(t.avg_weight_bits),
      seconds: asNum(t.seconds)}));
    const met = typeof at.met === 'boolean' ? at.met : null;
    section.appendChild(h('p', null, [
      metric + ', target ', figText(target, fmtDb, null, 'autotune-target'), ': ',
      h('span', {id: 'autotune-met', class: met === null ? null : met ? 'met' : 'not-met'},
        met === null ? 'unknown' : met ? 'met' : 'not met'),
      best === null ? null : ' (best trial ' + best + ')',
      floatRef.v === null ? null : ['; float ', figText(floatRef, fmtDb, null, null)]].flat()));

    const W = 720, H = 290, L = 60, R = 90, T = 16, B = 40;
    const pw = W - L - R, ph = H - T - B;
    const ys = trials.map((t) => t.metric.v).filter((v) => v !== null && isFinite(v));
    for (const f of [target, floatRef]) if (f.v !== null && isFinite(f.v)) ys.push(f.v);
    let lo = Math.min(...ys), hi = Math.max(...ys);
    if (!ys.length) { lo = 0; hi = 1; }
    const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    const sc = niceScale(lo - pad, hi + pad, 5);
    const y = (v) =>
      T + ph - ((Math.max(sc.lo, Math.min(sc.hi, v)) - sc.lo) / (sc.hi - sc.lo)) * ph;
    const n = trials.length;
    const x = (i) => L + (n <= 1 ? pw / 2 : (i * pw) / (n - 1));
    const svg = s('svg', {id: 'autotune-chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                          role: 'img'});
    const axis = s('g', {class: 'axis'});
    yGrid(axis, sc.ticks, y, L, pw);
    trials.forEach((t, i) => axis.appendChild(
        s('text', {class: 'tick', x: x(i), y: T + ph + 14, 'text-anchor': 'middle'},
          String(t.trial))));
    axis.appendChild(s('text', {x: L + pw / 2, y: H - 6, 'text-anchor': 'middle'}, 'trial'));
    axis.appendChild(s('text', {x: 14, y: T + ph / 2, 'text-anchor': 'middle',
                                transform: 'rotate(-90 14 ' + (T + ph / 2) + ')'}, metric));
    svg.appendChild(axis);
    if (floatRef.v !== null && isFinite(floatRef.v)) {
      svg.appendChild(s('line', {class: 'float-line', 'data-value': dataValue(floatRef), x1: L,
                                 x2: L + pw, y1: y(floatRef.v), y2: y(floatRef.v)}));
      svg.appendChild(s('text', {x: L + pw + 6, y: y(floatRef.v) + 4}, 'float ' + fmtDb(floatRef)));
    }
    if (target.v !== null && isFinite(target.v)) {
      svg.appendChild(s('line', {class: 'target-line', 'data-value': dataValue(target), x1: L,
                                 x2: L + pw, y1: y(target.v), y2: y(target.v)}));
      svg.appendChild(s('text', {x: L + pw + 6, y: y(target.v) + 4}, 'target ' + fmtDb(target)));
    }
    const points = trials.map((t, i) => ({t: t, i: i})).filter((p) => p.t.metric.v !== null);
    if (points.length > 1) {
      svg.appendChild(s('polyline', {class: 'trial-path', points: points.map(
          (p) => x(p.i) + ',' + y(p.t.metric.v)).join(' ')}));
    }
    for (const p of points) {
      const isBest = p.t.trial === best;
      svg.appendChild(s('circle', {class: 'trial-point' + (isBest ? ' best' : ''),
                                   'data-trial': p.t.trial, 'data-value': dataValue(p.t.metric),
                                   cx: x(p.i), cy: y(p.t.metric.v), r: isBest ? 7 : 5},
                        svgTitle('trial ' + p.t.trial +
                                 (p.t.change ? ' (' + p.t.change + ')' : '') + ': ' +
                                 fmtDb(p.t.metric))));
    }
    section.appendChild(svg);

    const columns = [
      ['trial', 'Trial', null], ['change', 'Change', null],
      ['metric', metric, fmtDb], ['drop', 'Drop', fmtDb], ['float_units', 'Float units', null],
      ['wide_units', 'Wide units', null],
      ['avg_weight_bits', 'Avg weight bits', (v) => v.toFixed(2)],
      ['seconds', 'Seconds', (v) => v.toFixed(1)]];
    const table = h('table', {class: 'trials'});
    table.appendChild(h('thead', null, h('tr', null, columns.map(
        ([key, label]) => h('th', {class: key === 'change' ? null : 'num'}, label)))));
    const tbody = h('tbody');
    for (const t of trials) {
      const row = h('tr', {class: 'trial-row' + (t.trial === best ? ' best' : ''),
                           'data-trial': t.trial});
      for (const [key, , fmt] of columns) {
        const v = t[key];
        const td = h('td', {class: 'col-' + key + (key === 'change' ? '' : ' num')});
        if (v !== null && typeof v === 'object') {
          setAttrs(td, {'data-value': v.v === null ? null : dataValue(v)});
          td.textContent = fmt(v);
        } else {
          if (typeof v === 'number') td.setAttribute('data-value', String(v));
          td.textContent = v === null ? '\u2014' : fmt ? fmt(v) : String(v);
        }
        row.appendChild(td);
      }
      tbody.appendChild(row);
    }
    table.appendChild(tbody);
    section.appendChild(table);
    return section;
  }

  function mixedPrecision(mp) {
    const section = h('section', {id: 'mixed-precision'});
    section.appendChild(h('h2', null, 'Mixed precision'));
    const top1 = asStr(mp.metric) === 'top1';
    const metric = top1 ? 'top-1 %' : 'output SQNR (dB)';
    const budget = numFig(mp.budget_average_bits), average = numFig(mp.average_bits);
    const chosenMetric = dbFig(mp.chosen_metric), interp = dbFig(mp.uniform_interpolated);
    const predicted = dbFig(mp.predicted_sqnr_db), floatRef = dbFig(mp.float);
    const chosen = asNum(mp.chosen_trial);
    const bitsFmt = (f) => fixed(f.v, 2);
    section.appendChild(h('p', null, [
      'budget ', figText(budget, bitsFmt, null, 'mp-budget'), ' bits per weight; chose ',
      figText(average, bitsFmt, null, 'mp-average'), ' (',
      asNum(mp.weight_bytes) === null ? '\u2014' : String(mp.weight_bytes), ' bytes): ',
      metric + ' ', figText(chosenMetric, fmtDb, null, 'mp-chosen-metric'),
      ' against ', figText(interp, fmtDb, null, 'mp-interpolated'),
      ' for uniform widths at the same bits (interpolated); predicted output SQNR ',
      figText(predicted, fmtDb, null, 'mp-predicted'), ' dB',
      floatRef.v === null ? null : '; float ' + fmtDb(floatRef)].flat()));

    const trials = asArr(mp.trials).map(asObj).filter(Boolean).map((t, i) => ({
      trial: asNum(t.trial) === null ? i + 1 : t.trial, change: asStr(t.change),
      metric: dbFig(t.metric), bits: asNum(t.avg_weight_bits),
      met: typeof t.met === 'boolean' ? t.met : null, seconds: asNum(t.seconds)}));
    const points = trials.filter((t) => t.metric.v !== null && isFinite(t.metric.v) &&
                                        t.bits !== null);
    const W = 720, H = 290, L = 60, R = 90, T = 16, B = 40;
    const pw = W - L - R, ph = H - T - B;
    const xs = points.map((t) => t.bits);
    if (budget.v !== null) xs.push(budget.v);
    const ys = points.map((t) => t.metric.v);
    if (floatRef.v !== null && isFinite(floatRef.v)) ys.push(floatRef.v);
    const xsc = niceScale(xs.length ? Math.min(...xs) : 0, xs.length ? Math.max(...xs) : 8, 6);
    let lo = ys.length ? Math.min(...ys) : 0, hi = ys.length ? Math.max(...ys) : 1;
    const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    const ysc = niceScale(lo - pad, hi + pad, 5);
    const x = (v) => L + ((v - xsc.lo) / (xsc.hi - xsc.lo)) * pw;
    const y = (v) =>
      T + ph - ((Math.max(ysc.lo, Math.min(ysc.hi, v)) - ysc.lo) / (ysc.hi - ysc.lo)) * ph;
    const svg = s('svg', {id: 'mp-chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                          role: 'img'});
    const axis = s('g', {class: 'axis'});
    yGrid(axis, ysc.ticks, y, L, pw);
    for (const t of xsc.ticks) {
      axis.appendChild(s('text', {class: 'tick', x: x(t), y: T + ph + 14,
                                  'text-anchor': 'middle'}, tickText(t)));
    }
    axis.appendChild(s('text', {x: L + pw / 2, y: H - 6, 'text-anchor': 'middle'},
                       'average weight bits'));
    axis.appendChild(s('text', {x: 14, y: T + ph / 2, 'text-anchor': 'middle',
                                transform: 'rotate(-90 14 ' + (T + ph / 2) + ')'}, metric));
    svg.appendChild(axis);
    if (budget.v !== null) {
      svg.appendChild(s('line', {class: 'budget-line', 'data-value': dataValue(budget),
                                 x1: x(budget.v), x2: x(budget.v), y1: T, y2: T + ph}));
      svg.appendChild(s('text', {x: x(budget.v) + 4, y: T + 10}, 'budget ' + bitsFmt(budget)));
    }
    if (floatRef.v !== null && isFinite(floatRef.v)) {
      svg.appendChild(s('line', {class: 'float-line', 'data-value': dataValue(floatRef), x1: L,
                                 x2: L + pw, y1: y(floatRef.v), y2: y(floatRef.v)}));
      svg.appendChild(s('text', {x: L + pw + 6, y: y(floatRef.v) + 4}, 'float ' + fmtDb(floatRef)));
    }
    const uniform = points.filter((t) => t.trial !== chosen).sort((a, b) => a.bits - b.bits);
    if (uniform.length > 1) {
      svg.appendChild(s('polyline', {class: 'uniform-path', points: uniform.map(
          (t) => x(t.bits) + ',' + y(t.metric.v)).join(' ')}));
    }
    for (const t of points) {
      const isChosen = t.trial === chosen;
      svg.appendChild(s('circle', {class: 'mp-point' + (isChosen ? ' chosen' : ''),
                                   'data-trial': t.trial, 'data-bits': String(t.bits),
                                   'data-value': dataValue(t.metric), cx: x(t.bits),
                                   cy: y(t.metric.v), r: isChosen ? 7 : 5},
                        svgTitle((t.change || 'trial ' + t.trial) + ': ' + fmtDb(t.metric) +
                                 ' at ' + t.bits.toFixed(2) + ' bits')));
    }
    section.appendChild(svg);

    const trialTable = h('table', {class: 'trials'});
    trialTable.appendChild(h('thead', null, h('tr', null, [
      h('th', {class: 'num'}, 'Trial'), h('th', null, 'Change'), h('th', {class: 'num'}, metric),
      h('th', {class: 'num'}, 'Avg weight bits'), h('th', null, 'In budget'),
      h('th', {class: 'num'}, 'Seconds')])));
    const trialBody = h('tbody');
    for (const t of trials) {
      trialBody.appendChild(h('tr', {class: 'mp-trial-row' + (t.trial === chosen ? ' best' : ''),
                                     'data-trial': t.trial}, [
        h('td', {class: 'col-trial num'}, String(t.trial)),
        h('td', {class: 'col-change'}, t.change === null ? '\u2014' : t.change),
        h('td', {class: 'col-metric num',
                 'data-value': t.metric.v === null ? null : dataValue(t.metric)}, fmtDb(t.metric)),
        h('td', {class: 'col-avg_weight_bits num',
                 'data-value': t.bits === null ? null : String(t.bits)},
          t.bits === null ? '\u2014' : t.bits.toFixed(2)),
        h('td', {class: 'col-met'}, t.met === null ? '\u2014' : t.met ? 'yes' : 'no'),
        h('td', {class: 'col-seconds num'}, t.seconds === null ? '\u2014' : t.seconds.toFixed(1))]));
    }
    trialTable.appendChild(trialBody);
    section.appendChild(trialTable);

    // Per unit: the width chosen and its weights' noise at every width, the chosen one marked.
    const widths = asArr(mp.widths).map(asNum).filter((w) => w !== null);
    const unitTable = h('table', {class: 'mp-units'});
    unitTable.appendChild(h('thead', null, h('tr', null, [
      h('th', null, 'Unit'), h('th', {class: 'num'}, 'Weights'), h('th', {class: 'num'}, 'Bits'),
      h('th', null, 'Pinned')].concat(widths.map(
          (w) => h('th', {class: 'num'}, 'noise W' + w))))));
    const unitBody = h('tbody');
    for (const u of asArr(mp.units).map(asObj).filter(Boolean)) {
      const noise = asObj(u.noise) || {};
      const bits = asNum(u.bits);
      const row = h('tr', {class: 'mp-unit-row', 'data-unit': asStr(u.unit) || ''}, [
        h('td', {class: 'col-unit'}, h('span', {class: 'mono'}, breakable(asStr(u.unit) || '?'))),
        h('td', {class: 'col-elements num',
                 'data-value': asNum(u.elements) === null ? null : String(u.elements)},
          asNum(u.elements) === null ? '\u2014' : String(u.elements)),
        h('td', {class: 'col-bits num', 'data-value': bits === null ? null : String(bits)},
          bits === null ? '\u2014' : String(bits)),
        h('td', {class: 'col-fixed'}, u.fixed === true ? 'yes' : '')]);
      for (const w of widths) {
        const f = numFig(noise[String(w)]);
        row.appendChild(h('td', {class: 'col-noise-' + w + ' num' + (w === bits ? ' chosen' : ''),
                                 'data-value': f.v === null ? null : dataValue(f)}, fmtSci(f)));
      }
      unitBody.appendChild(row);
    }
    unitTable.appendChild(unitBody);
    section.appendChild(h('div', {class: 'table-wrap'}, unitTable));
    return section;
  }

  function main() {
    const rep = asObj(JSON.parse(document.getElementById('qforge-report').textContent)) || {};
    const root = document.getElementById('report');
    const quantized = asObj(rep.quantized);
    const allOn = quantized ? measuredDb(quantized) : NONE;
    const allOnCos = quantized ? numFig(quantized.cosine) : NONE;
    const qs = asArr(rep.quantizers).map(asObj).filter(Boolean)
                   .map((q, i) => quantizerView(q, i, allOn));
    const rankingBy = placeSensitivity(qs, asStr(rep.ranking_by));
    root.appendChild(header(rep, allOn, allOnCos));
    // A quantize report has no per-quantizer analysis: its sections would only say so.
    if (qs.length || asStr(rep.command) !== 'quantize') {
      root.appendChild(quantizerTable(qs, rankingBy));
      root.appendChild(barCharts(qs));
      root.appendChild(histograms(qs));
    }
    const at = asObj(rep.autotune);
    if (at) root.appendChild(autotune(at));
    const mp = asObj(rep.mixed_precision);
    if (mp) root.appendChild(mixedPrecision(mp));
    document.body.setAttribute('data-rendered', 'ok');
  }

  try {
    main();
  } catch (e) {
    const pre = document.createElement('pre');
    pre.id = 'render-error';
    pre.textContent = 'The report could not be drawn: ' + ((e && e.stack) || e);
    document.body.appendChild(pre);
  }
})();
)js";

// Text for HTML content and double-quoted attribute values.
std::string escapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string dumpUtf8(const nlohmann::json& j) {
  // replace: a name that is not UTF-8 gets U+FFFD instead of making dump() throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// JSON that can sit inside <script>: <, > and & only occur inside strings, where \u escapes
// mean the same, so "</script>" and "<!--" cannot appear in the block.
std::string scriptSafeJson(const nlohmann::json& j) {
  const std::string text = dumpUtf8(j);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string pageTitle(const nlohmann::json& report) {
  if (!report.is_object()) return "qforge analyze";
  const auto model = report.find("model");
  if (model == report.end() || !model->is_string()) return "qforge analyze";
  // Through the replacing dump so the title is UTF-8 like the rest of the page.
  const std::string name = nlohmann::json::parse(dumpUtf8(*model)).get<std::string>();
  return "qforge analyze: " + name;
}

}  // namespace

std::string analysisHtml(const nlohmann::json& report) {
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may be loaded from anywhere: the page is one file, viewable offline.
  html +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  html += "<meta name=\"generator\" content=\"qforge analyze\">\n";
  html += "<title>" + escapeHtml(pageTitle(report)) + "</title>\n";
  html += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  html +=
      "<noscript><p>This report draws its tables and charts with JavaScript. Its data is the "
      "JSON in the script element with id qforge-report.</p></noscript>\n";
  html += "<main id=\"report\"></main>\n";
  html += "<script type=\"application/json\" id=\"qforge-report\">" + scriptSafeJson(report) +
          "</script>\n";
  html += "<script>" + std::string(kScript) + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace qforge::pipelines
