// The live page: polls /api/state (every DT, the graph) and /api/dt/<name> (the selected DT's
// charts and history) and redraws with plotly.js; actions are POSTs the server guards.
"use strict";

const POLL_MS = 2000;
let selected = null;
let config = { displaylogo: false, responsive: true };

const $ = (id) => document.getElementById(id);

function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (value >= 3600) return (value / 3600).toFixed(1) + " h";
  if (value >= 120) return (value / 60).toFixed(1) + " min";
  return value.toFixed(1) + " s";
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "-" : String(text);
  if (className) td.className = className;
  return td;
}

function statusBadge(td, status) {
  td.textContent = "";
  const badge = document.createElement("span");
  badge.className = "status status-" + status.replace(/ /g, "-");
  badge.textContent = status;
  td.appendChild(badge);
}

function say(text, error) {
  $("message").textContent = text;
  $("message").className = error ? "error" : "";
}

async function fetchJson(url, options) {
  const response = await fetch(url, options);
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function drawTable(dts) {
  const body = $("dts").tBodies[0];
  body.textContent = "";
  for (const dt of dts) {
    const row = body.insertRow();
    row.dataset.dt = dt.model;
    if (dt.model === selected) row.className = "selected";
    cell(row, dt.model, dt.refreshing ? "model refreshing" : "model");
    statusBadge(cell(row, "", "status-cell"), dt.status);
    const over = dt.lag_seconds !== null && dt.target_lag_seconds !== null && dt.lag_seconds > dt.target_lag_seconds;
    cell(row, seconds(dt.lag_seconds), over ? "lag over" : "lag");
    cell(row, dt.target_lag);
    cell(row, dt.data_timestamp);
    cell(row, dt.last ? [dt.last.action, dt.last.state].filter(Boolean).join(" ") : "-", "last");
    cell(row, dt.consecutive_failures);
    row.addEventListener("click", () => select(dt.model));
  }
}

function drawDetail(dt, detail) {
  $("detail").hidden = false;
  $("detail-model").textContent = dt.model;
  $("detail-name").textContent = dt.name;
  const status = $("detail-status");
  status.textContent = dt.status;
  status.className = "status status-" + dt.status.replace(/ /g, "-");
  $("detail-stamp").textContent = dt.data_timestamp || "-";
  $("detail-lag").textContent = seconds(dt.lag_seconds);
  $("detail-target").textContent = dt.target_lag;
  $("suspend").disabled = dt.scheduling_state === "SUSPENDED";
  $("resume").disabled = dt.scheduling_state !== "SUSPENDED";
  if (!detail) return;
  Plotly.react("lag", detail.lag.data, detail.lag.layout, config);
  Plotly.react("durations", detail.durations.data, detail.durations.layout, config);
  const body = $("history").tBodies[0];
  body.textContent = "";
  for (const r of detail.history) {
    const row = body.insertRow();
    row.dataset.trigger = r.trigger;
    row.dataset.state = r.state;
    for (const value of [r.started, r.trigger, r.action, r.state, r.rows_inserted, r.rows_deleted,
      r.seconds.toFixed(2), r.data_timestamp, r.reason]) cell(row, value);
  }
}

async function poll() {
  try {
    const state = await fetchJson("/api/state");
    config = state.config;
    document.title = state.title;
    $("title").textContent = state.title;
    $("mode").textContent = state.stopping ? "stopping" : state.runner ? "runner" : "beside a runner";
    $("updated").textContent = state.taken_at;
    Plotly.react("graph", state.graph.data, state.graph.layout, config);
    drawTable(state.dts);
    const dt = state.dts.find((d) => d.model === selected);
    if (dt) drawDetail(dt, await fetchJson("/api/dt/" + encodeURIComponent(dt.model)));
  } catch (error) {
    say(error.message, true);
  }
}

function select(model) {
  selected = model;
  $("explain-text").hidden = true;
  history.replaceState(null, "", "#" + encodeURIComponent(model));
  poll();
}

async function act(action, question) {
  if (!selected || !window.confirm(question.replace("{dt}", selected))) return;
  try {
    const body = await fetchJson(`/api/dt/${encodeURIComponent(selected)}/${action}`, {
      method: "POST",
      headers: { "X-Dyntable-Request": "1" },
    });
    say(body.message, false);
  } catch (error) {
    say(error.message, true);
  }
  poll();
}

async function explain() {
  const pre = $("explain-text");
  pre.hidden = false;
  pre.textContent = "Explaining " + selected + "…";
  try {
    pre.textContent = (await fetchJson(`/api/dt/${encodeURIComponent(selected)}/explain`)).text;
  } catch (error) {
    pre.textContent = error.message;
  }
}

$("refresh").addEventListener("click", () => act("refresh", "Refresh {dt} now, with the dynamic tables it reads?"));
$("suspend").addEventListener("click", () => act("suspend", "Suspend {dt}? Runners skip it until it is resumed."));
$("resume").addEventListener("click", () => act("resume", "Resume {dt}?"));
$("explain").addEventListener("click", explain);
if (location.hash.length > 1) selected = decodeURIComponent(location.hash.slice(1));
poll().then(() => {
  // plotly.js adds .on() to a plot's element once it has drawn it
  if ($("graph").on) $("graph").on("plotly_click", (event) => {
    const point = event.points[0];
    if (point && point.customdata && point.customdata[1] === "dt") select(point.customdata[2]);
  });
});
setInterval(poll, POLL_MS);
