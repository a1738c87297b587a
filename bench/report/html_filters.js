// The filters of RESULTS/index.html (bench/report/html.py embeds this file).
// Input: the page's <select data-key> filters, elements tagged data-scenario / data-server /
// data-machine / data-load_model, and the plotly charts' trace meta. Output: the elements and
// traces that do not match hidden, and "N of M points shown" in #shown-count.
(function () {
  "use strict";
  var selects = Array.prototype.slice.call(document.querySelectorAll("#filters select"));
  // The summary's tables name the server and machine in columns of those names: tag the rows.
  document.querySelectorAll("section table").forEach(function (table) {
    var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
      return th.textContent.trim().toLowerCase();
    });
    var server = heads.indexOf("server");
    var machine = heads.indexOf("machine");
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      if (server >= 0 && tr.children[server]) {
        tr.dataset.server = tr.children[server].textContent.trim().split(" ")[0];
      }
      if (machine >= 0 && tr.children[machine]) {
        tr.dataset.machine = tr.children[machine].textContent.trim().split(" (")[0];
      }
    });
  });
  function matches(tags, state) {
    return Object.keys(state).every(function (key) {
      return !state[key] || !tags[key] || String(tags[key]) === state[key];
    });
  }
  function apply() {
    var state = {};
    selects.forEach(function (s) { state[s.dataset.key] = s.value; });
    document.querySelectorAll("section, .chart, tr.point, section tbody tr").forEach(function (el) {
      el.classList.toggle("hidden", !matches(el.dataset, state));
    });
    document.querySelectorAll(".chart .js-plotly-plot").forEach(function (div) {
      if (!div.originalVisible) {
        div.originalVisible = div.data.map(function (t) { return t.visible === undefined ? true : t.visible; });
      }
      var visible = div.data.map(function (t, i) {
        return matches(t.meta || {}, state) ? div.originalVisible[i] : false;
      });
      window.Plotly.restyle(div, { visible: visible });
    });
    var shown = document.querySelectorAll("tr.point:not(.hidden)").length;
    var total = document.getElementById("points-data").dataset.count;
    document.getElementById("shown-count").textContent = shown + " of " + total + " points shown";
  }
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  apply();
})();
