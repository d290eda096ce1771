// `qforge analyze`'s report as one self-contained HTML page: no network, inline CSS and JS, charts
// as inline SVG drawn by the page's own script from the report's JSON, which is embedded in
// <script type="application/json" id="qforge-report"> with <, > and & written as \u003c, \u003e
// and \u0026 (so a name holding "</script>" cannot end the block). The script builds every
// element with createElement/textContent/setAttribute, never from markup, so names from the model
// show as text and cannot add elements.
//
// DOM contract (tests and users' scripts rely on it; keep it stable). Every data-value holds the
// JSON number in full precision (JS String(x); "Infinity" for an SQNR the JSON wrote as null for
// identical outputs); visible text is rounded: dB and task metrics 2 decimals, cosine 6, Fisher
// 3 significant digits (x.xxe-y); "∞" for an infinite SQNR, "—" for an absent figure. Infinite:
// >= 1e300 anywhere, and null inside a measurement that was made (quantized, isolated,
// leave_one_out); a null local/accumulated SQNR is drawn as absent.
//   body[data-rendered=ok]                   the script ran to the end; else pre#render-error
//   section#quantizers, #bars, #histograms   unless the report is quantize's with no quantizers
//   #model                                   the model path (text)
//   #quantized-sqnr, #quantized-cosine       whole model quantized vs float (text, data-value)
//   #task-float, #task-quantized, #task-delta  task metric, when the report has "task"
//   tr.quantizer-row[data-quantizer=NAME]    one table row per quantizer (data-rank when ranked);
//     its cells td.col-KEY, KEY in rank name kind op bits granularity observer isolated gain
//     fisher local accumulated suggestions; the figure cells carry data-value; the name is in
//     td.col-name span.qname
//   rect.sqnr-bar[data-quantizer=NAME][data-value=V]  isolated SQNR (dB), one per quantizer with
//     an isolated measurement; text.bar-label[data-quantizer=NAME] its printed value
//     (svg#sqnr-chart)
//   rect.gain-bar[data-quantizer=NAME][data-value=V]  leave-one-out gain (dB), one per quantizer
//     with one; its labels are text.bar-label too (svg#gain-chart)
//   svg.histogram[data-quantizer=NAME]       one per quantizer with range.histogram: rect.hist-bin
//     [data-count] per bin, line.range-mark[data-mark=min|max|p0_1|p99_9][data-value]
//   svg#autotune-chart                       when the report has "autotune": circle.trial-point
//     [data-trial=N][data-value] per trial with a metric, line.target-line[data-value]
//   tr.trial-row[data-trial=N]               the trials table; cells td.col-KEY, KEY in trial
//     change metric drop float_units wide_units avg_weight_bits seconds
//   section#mixed-precision                  when the report has "mixed_precision": #mp-budget,
//     #mp-average (bits per weight), #mp-chosen-metric, #mp-interpolated, #mp-predicted (text,
//     data-value); svg#mp-chart with circle.mp-point[data-trial][data-bits][data-value] per trial
//     with a metric (.chosen for the choice) and line.budget-line[data-value];
//     tr.mp-trial-row[data-trial=N] with td.col-KEY, KEY in trial change metric avg_weight_bits
//     met seconds; tr.mp-unit-row[data-unit=NAME] with td.col-unit, td.col-elements, td.col-bits,
//     td.col-fixed and td.col-noise-W per width W (data-value; text x.xxe-y)
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace qforge::pipelines {

// The complete HTML document for an analysis report (`qforge analyze --json`'s object). Missing
// optional fields and nulls are drawn as absent; any JSON value is accepted (a non-object draws an
// empty report). Strings that are not UTF-8 are written with U+FFFD in their place.
std::string analysisHtml(const nlohmann::json& report);

}  // namespace qforge::pipelines
