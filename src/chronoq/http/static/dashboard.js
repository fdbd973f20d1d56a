// chronoq dashboard: live overview charts and table, live job pages, confirmations.
// Everything user-supplied is written with textContent or as attribute values, never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const LATENESS_LABELS = (le) => (le === null ? "more" : le < 1 ? `${Math.round(le * 1000)}ms` : `${le}s`);

// The same short forms as the pages (chronoq.core.durations.format_duration): <1ms, 450ms,
// 12.3s, 4m05s, 2h10m.
function formatSeconds(value) {
  if (value === null || value === undefined) return "-";
  const s = Math.max(0, value);
  if (s > 0 && s < 0.001) return "<1ms";
  if (s < 1) return `${Math.round(s * 1000)}ms`;
  if (s < 60) return `${s.toFixed(1)}s`;
  const pad = (n) => String(n).padStart(2, "0");
  let minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes}m${pad(Math.floor(s) % 60)}s`;
  let hours = Math.floor(minutes / 60);
  minutes %= 60;
  if (hours < 24) return `${hours}h${pad(minutes)}m`;
  const days = Math.floor(hours / 24);
  hours %= 24;
  return `${days}d${pad(hours)}h`;
}

function perMinute(value) {
  return value < 100 ? value.toFixed(1) : value.toFixed(0);
}

function utcText(iso) {
  return new Date(iso).toISOString().replace("T", " ").slice(0, 19);
}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

function svgEl(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

// -- queue table ----------------------------------------------------------------------------

function numberCell(text) {
  return el("td", { class: "num" }, String(text));
}

function pauseForm(queue, csrf) {
  const form = el("form", { method: "post", action: queue.paused ? "/queues/resume" : "/queues/pause" });
  form.append(
    el("input", { type: "hidden", name: "csrf", value: csrf }),
    el("input", { type: "hidden", name: "name", value: queue.queue }),
    el("button", { class: "small" }, queue.paused ? "Resume" : "Pause"),
  );
  const cell = el("td", { class: "actions" });
  cell.append(form);
  return cell;
}

function queueRow(queue, admin, csrf) {
  const row = el("tr");
  const name = el("td");
  name.append(el("a", { href: `/jobs?queue=${encodeURIComponent(queue.queue)}` }, queue.queue));
  const state = el("td");
  state.append(el("span", { class: `badge ${queue.paused ? "paused" : "active"}` }, queue.paused ? "paused" : "active"));
  const dead = el("td", { class: "num" });
  if (queue.dead) dead.append(el("a", { href: `/dead?queue=${encodeURIComponent(queue.queue)}` }, String(queue.dead)));
  else dead.textContent = "0";
  row.append(
    name,
    state,
    numberCell(queue.pending),
    numberCell(queue.due),
    numberCell(queue.running),
    numberCell(perMinute(queue.done_per_minute)),
    numberCell(perMinute(queue.dead_per_minute)),
    numberCell(formatSeconds(queue.lateness_p50)),
    numberCell(formatSeconds(queue.lateness_p99)),
    numberCell(queue.due ? formatSeconds(queue.oldest_due_age) : "-"),
    dead,
  );
  if (admin) row.append(pauseForm(queue, csrf));
  return row;
}

function renderQueues(table, queues) {
  const admin = table.dataset.admin === "1";
  const body = table.querySelector("tbody");
  const rows = queues.map((queue) => queueRow(queue, admin, table.dataset.csrf));
  if (!rows.length) {
    const empty = el("tr", { class: "empty" });
    empty.append(el("td", { colspan: "12" }, "No queue has jobs or settings yet."));
    rows.push(empty);
  }
  body.replaceChildren(...rows);
}

// -- charts ---------------------------------------------------------------------------------

const BOX = { width: 640, height: 200, left: 40, right: 8, top: 12, bottom: 24 };

// A round axis maximum (1, 2 or 5 times a power of ten) so gridline labels read well.
function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function drawFrame(svg, max) {
  const plotHeight = BOX.height - BOX.top - BOX.bottom;
  for (const fraction of [0, 0.5, 1]) {
    const y = BOX.top + plotHeight * (1 - fraction);
    svg.append(svgEl("line", { class: "axis", x1: BOX.left, x2: BOX.width - BOX.right, y1: y, y2: y }));
    const label = fraction === 0.5 && max % 2 ? (max / 2).toFixed(1) : String(max * fraction);
    svg.append(svgEl("text", { x: BOX.left - 6, y: y + 4, "text-anchor": "end" }, label));
  }
}

// Bars of stacked parts: `stacks` is one array of {value, kind, title} per bar.
function drawBars(svg, stacks, labels, emptyNote) {
  svg.replaceChildren();
  const totals = stacks.map((parts) => parts.reduce((sum, part) => sum + part.value, 0));
  const max = niceMax(Math.max(0, ...totals));
  drawFrame(svg, max);
  const plotWidth = BOX.width - BOX.left - BOX.right;
  const plotHeight = BOX.height - BOX.top - BOX.bottom;
  const slot = plotWidth / stacks.length;
  stacks.forEach((parts, index) => {
    const x = BOX.left + index * slot + slot * 0.12;
    let base = BOX.top + plotHeight;
    for (const part of parts) {
      if (!part.value) continue;
      const height = (part.value / max) * plotHeight;
      base -= height;
      const bar = svgEl("rect", { class: part.kind, x, y: base, width: slot * 0.76, height });
      bar.append(svgEl("title", {}, part.title));
      svg.append(bar);
    }
    if (labels[index]) {
      svg.append(svgEl("text", { x: x + slot * 0.38, y: BOX.height - 6, "text-anchor": "middle" }, labels[index]));
    }
  });
  if (!totals.some(Boolean)) {
    svg.append(svgEl("text", { class: "empty-note", x: BOX.width / 2, y: BOX.height / 2, "text-anchor": "middle" }, emptyNote));
  }
}

function drawThroughput(svg, points) {
  const last = points.length ? points[points.length - 1].start : 0;
  const stacks = points.map((p) => {
    const when = utcText(p.start * 1000);
    return ["done", "dead", "other"].map((kind) => ({ value: p[kind], kind, title: `${when} UTC: ${p[kind]} ${kind}` }));
  });
  // A label each minute, counted back from the newest bucket.
  const labels = points.map((p) => {
    const back = Math.round((last - p.start) / 60);
    return (last - p.start) % 60 === 0 ? (back ? `-${back}m` : "now") : "";
  });
  drawBars(svg, stacks, labels, "no job finished in the window");
}

function drawLateness(svg, bins) {
  const stacks = bins.map((bin) => {
    const bound = bin.le === null ? "later" : `up to ${LATENESS_LABELS(bin.le)}`;
    return [{ value: bin.count, kind: "late", title: `${bin.count} job(s) started ${bound} late` }];
  });
  const labels = bins.map((bin) => LATENESS_LABELS(bin.le));
  drawBars(svg, stacks, labels, "no job done in the window");
}

// -- overview -------------------------------------------------------------------------------

function showOverview(root, data) {
  renderQueues(root.querySelector("table.queues"), data.queues);
  drawThroughput(root.querySelector("#throughput-chart"), data.throughput);
  drawLateness(root.querySelector("#lateness-chart"), data.lateness_histogram);
  root.querySelector("#db-now").textContent = utcText(data.db_now);
}

function setState(root, text, stale) {
  const state = root.querySelector("#refresh-state");
  state.textContent = text;
  state.classList.toggle("stale", stale);
}

async function refreshOverview(root) {
  try {
    const response = await fetch(root.dataset.source, { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401) return setState(root, "signed out: reload to sign in", true);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    showOverview(root, await response.json());
    setState(root, `rates over the last minute · live`, false);
  } catch (error) {
    setState(root, `refresh failed (${error.message}); retrying`, true);
  }
}

function startOverview(root) {
  showOverview(root, JSON.parse(document.getElementById("overview-data").textContent));
  const every = Number(root.dataset.poll) || 2000;
  const tick = async () => {
    // A hidden tab asks for nothing; it catches up as soon as it is shown again.
    if (!document.hidden) await refreshOverview(root);
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

// -- live job page --------------------------------------------------------------------------

// A job still pending or running reloads its page when its status, attempts or progress change.
function startLiveJob(root) {
  const every = Number(root.dataset.poll) || 2000;
  const tick = async () => {
    try {
      const response = await fetch(root.dataset.live, { credentials: "same-origin", cache: "no-store" });
      if (response.ok) {
        const job = await response.json();
        // Compared as numbers: Python and JavaScript may write the same float differently.
        const shown = root.dataset.progress === "" ? null : Number(root.dataset.progress);
        const moved = job.status !== root.dataset.status || String(job.attempts) !== root.dataset.attempts;
        const reported = job.progress !== shown || (job.progress_note || "") !== root.dataset.note;
        if (moved || reported) {
          window.location.reload();
          return;
        }
      }
    } catch (error) {
      // The server may be restarting: keep asking.
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

// -- forms ----------------------------------------------------------------------------------

document.addEventListener("submit", (event) => {
  const question = event.submitter?.dataset.confirm || event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});

document.addEventListener("change", (event) => {
  const name = event.target.dataset?.selectAll;
  if (!name) return;
  for (const box of event.target.form.querySelectorAll(`input[type=checkbox][name="${name}"]`)) {
    box.checked = event.target.checked;
  }
});

document.addEventListener("DOMContentLoaded", () => {
  const overview = document.getElementById("overview");
  if (overview) startOverview(overview);
  const job = document.querySelector("[data-live]");
  if (job) startLiveJob(job);
});
