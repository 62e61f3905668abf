// The dashboard's main loop: follow the daemon (its status stream, else polling), render,
// and carry out the buttons. Polls are chained (the next starts when the last ended), so a slow daemon is never
// flooded; a daemon that does not answer turns on the "reconnecting" notice and the last
// picture stays on screen, dimmed, until it answers again.

import { getJson, isUnreachable, postJson, savedToken, saveToken } from "./api.js";
import { limitsOf } from "./chartmarks.js";
import { Charts } from "./charts.js";
import { askCheckSpecs, checkSpecsKnown } from "./checkspecs.js";
import { renderAdvice, renderCauses } from "./causes.js";
import { renderControls, showResult } from "./controls.js";
import { renderHost } from "./host.js";
import {
  renderCanaries,
  renderCards,
  renderDrain,
  renderEngines,
  renderEvents,
  renderReboot,
  renderVerdict,
} from "./render.js";
import { zoneLabel } from "./time.js";
import { renderTraffic } from "./traffic.js";
import { renderCrashes, renderFingerprint } from "./crashes.js";
import { pollBench } from "./bench.js";

const STATUS_EVERY_MS = 2000;
const EVENTS_EVERY_MS = 5000;
const LOG_EVERY_MS = 3000;
const HISTORY_EVERY_MS = { "1h": 15000, "24h": 60000 };
const PROFILES_EVERY_MS = 15000;
const TRAFFIC_EVERY_MS = 5000;
const CRASHES_EVERY_MS = 10000;
const BENCH_EVERY_MS = 10000;
const EVENT_KINDS = ["xid", "check", "serving", "recovery", "daemon", "reboot", "operator", "launch", "diag", "guard", "crash"];

const view = {
  status: null,
  lastAnswerMs: null,
  daemonPid: null,
  streaming: false,
  news: null,
  span: "1h",
  charts: new Charts(),
  jobs: {},
  // The action that asked for the token: resumed once the token is saved.
  resume: null,
};

const $ = (id) => document.getElementById(id);

function notify(text, isError) {
  const box = $("notice");
  box.textContent = text;
  box.classList.toggle("error", Boolean(isError));
  box.hidden = !text;
}

// Run ``task`` now and again ``delayMs()`` after each run ends; ``again(name)`` runs it
// early (or right after the run in flight), never two at once.
function every(name, delayMs, task) {
  const job = { running: false, pending: false, timer: null };
  const run = async () => {
    if (job.running) {
      job.pending = true;
      return;
    }
    window.clearTimeout(job.timer);
    job.running = true;
    try {
      await task();
    } catch (error) {
      console.warn(`${name}:`, error);
    } finally {
      job.running = false;
    }
    if (job.pending) {
      job.pending = false;
      run();
      return;
    }
    job.timer = window.setTimeout(run, delayMs());
  };
  view.jobs[name] = run;
  run();
}

function again(name) {
  if (view.jobs[name]) view.jobs[name]();
}

function setOffline(offline) {
  $("reconnecting").hidden = !offline;
  document.body.classList.toggle("offline", offline);
  if (offline && view.lastAnswerMs !== null) {
    const ago = Math.round((Date.now() - view.lastAnswerMs) / 1000);
    $("reconnect-age").textContent = `${ago} s ago`;
  }
}

// --- status --------------------------------------------------------------------------------

function renderRigInfo(status) {
  const rig = status.rig || {};
  $("rig-name").textContent = rig.name || "cmpfleet";
  const parts = [];
  if (rig.simulated) parts.push("simulated rig");
  if (rig.last_poll_age_s !== null && rig.last_poll_age_s !== undefined) {
    parts.push(`last poll ${rig.last_poll_age_s} s ago`);
  }
  if (rig.kernel_records_lost) parts.push(`${rig.kernel_records_lost} kernel records lost`);
  $("rig-info").textContent = parts.join(" · ");
}

function renderCardFilter(status) {
  const select = $("filter-card");
  const wanted = (status.cards || []).map((card) => String(card.index));
  const have = [...select.options].slice(1).map((option) => option.value);
  if (wanted.join(",") === have.join(",")) return;
  const chosen = select.value;
  select.replaceChildren(select.options[0], ...wanted.map((i) => new Option(`card ${i}`, i)));
  select.value = wanted.includes(chosen) ? chosen : "";
}

// A stream that went quiet this long is as good as gone.
const STREAM_SILENT_MS = 4 * STATUS_EVERY_MS;

async function pollStatus() {
  if (view.streaming) {
    if (view.lastAnswerMs !== null && Date.now() - view.lastAnswerMs > STREAM_SILENT_MS) setOffline(true);
    return; // the stream delivers the status: nothing to poll
  }
  let status;
  try {
    status = await getJson("/api/v1/status");
  } catch (error) {
    if (isUnreachable(error)) {
      setOffline(true);
      return;
    }
    setOffline(false);
    if (error.status === 401 || error.status === 403) {
      // A listener beyond loopback wants the token for reads too.
      $("token-form").hidden = false;
      notify(`${error.message}: enter the API token (it is in <state-dir>/api-token).`, true);
      return;
    }
    notify(error.message, true);
    return;
  }
  showStatus(status);
}

// The checks' specs came after a status was drawn without them: draw it again.
function redrawChecks() {
  if (!view.status) return;
  renderCards(view.status);
  renderHost(view.status);
}

function showStatus(status) {
  if (!checkSpecsKnown()) askCheckSpecs(redrawChecks).catch(() => {}); // again next status
  const wasOffline = !$("reconnecting").hidden;
  setOffline(false);
  view.status = status;
  view.lastAnswerMs = Date.now();
  const pid = status.daemon ? status.daemon.pid : null;
  renderVerdict(status);
  renderReboot(status);
  renderDrain(status);
  renderAdvice(status);
  renderCards(status);
  renderEngines(status, Date.now());
  renderControls(status);
  view.charts.setLimits(limitsOf(status));
  renderCauses(status);
  renderCanaries(status, Date.now());
  renderHost(status);
  renderFingerprint((status.recovery || {}).evidence);
  renderRigInfo(status);
  renderCardFilter(status);
  if (wasOffline || (view.daemonPid !== null && pid !== view.daemonPid)) {
    again("events"); // a restarted daemon may have news the last poll could not see
    again("history");
  }
  // Something happened (verdict, Xid count, latch or engine state moved): its event is news.
  const news = [
    status.overall,
    status.rig ? status.rig.xid_since_boot : "",
    status.recovery ? status.recovery.reboot_required : "",
    status.serving ? status.serving.state : "",
  ].join("|");
  if (view.news !== null && news !== view.news) {
    again("events");
    again("history"); // its markers (an Xid, the latch, a reboot) belong on the charts now
  }
  view.news = news;
  view.daemonPid = pid;
}

// Prefer the daemon's status stream (pushed, one connection); poll instead when it has none
// (an older fleetd) or refuses it (a non-loopback listener wants the token, which an
// EventSource cannot send). While streaming, a dropped connection is retried by the browser
// itself (the stream's retry: 2000), and the page says "reconnecting" meanwhile.
function openStream() {
  if (typeof window.EventSource !== "function") return;
  const source = new window.EventSource(`/api/v1/stream?interval_s=${STATUS_EVERY_MS / 1000}`);
  source.addEventListener("status", (message) => {
    view.streaming = true;
    showStatus(JSON.parse(message.data));
  });
  source.addEventListener("error", () => {
    if (source.readyState === window.EventSource.CLOSED) {
      view.streaming = false;
      again("status");
    } else if (view.streaming) {
      setOffline(true);
    }
  });
}

// --- events --------------------------------------------------------------------------------

async function pollEvents() {
  const params = new URLSearchParams({ limit: "100" });
  if ($("filter-kind").value) params.set("kind", $("filter-kind").value);
  if ($("filter-card").value) params.set("card", $("filter-card").value);
  let events = await getJson(`/api/v1/events?${params}`);
  const severity = $("filter-severity").value;
  if (severity) events = events.filter((event) => event.severity === severity);
  if ($("filter-unacked").checked) events = events.filter((event) => !event.acked);
  renderEvents(events);
}

// --- engine log ----------------------------------------------------------------------------

async function pollLog() {
  const box = $("engine-log");
  // Without a saved token the log still answers to a browser login (HTTP Basic with the
  // token, on a listener beyond loopback); on loopback it refuses, and the box says why.
  try {
    const body = await getJson("/api/v1/serving/logs?lines=80");
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 20;
    box.textContent = body.lines.length ? body.lines.join("\n") : "(the log is empty)";
    if (atBottom) box.scrollTop = box.scrollHeight;
  } catch (error) {
    if (error.status === 401 || error.status === 403) {
      box.textContent = "enter the API token to see the engine log (it can hold users' prompts)";
    } else if (!isUnreachable(error)) {
      box.textContent = `log: ${error.message}`;
    }
  }
}

// --- launch profiles -----------------------------------------------------------------------

// The profile picker: shown when the rig has more than one profile; the one in force selected.
async function pollProfiles() {
  let document_;
  try {
    document_ = await getJson("/api/v1/serving/profiles");
  } catch (error) {
    $("profile-switch").hidden = true; // no engine configured, or an older fleetd
    return;
  }
  const select = $("profile-select");
  const profiles = document_.profiles || [];
  const chosen = select.dataset.touched ? select.value : document_.active;
  select.replaceChildren(
    ...profiles.map((p) => {
      const lint = p.lint.verdict === "clean" ? "" : ` (lint: ${p.lint.verdict})`;
      return new Option(`${p.name}${p.active ? " (in force)" : ""}${lint}`, p.name);
    }),
  );
  select.value = profiles.some((p) => p.name === chosen) ? chosen : document_.active;
  $("profile-switch").hidden = profiles.length < 2;
}

// The crash timeline (the black box's bundles); hidden while there is none.
async function pollCrashes() {
  try {
    renderCrashes(await getJson("/api/v1/crashes?limit=20"));
  } catch (error) {
    renderCrashes(null);
  }
}

// The traffic guard's panel; a rig without the guard answers 409 and the panel stays hidden.
async function pollTraffic() {
  try {
    renderTraffic(await getJson("/api/v1/guard"));
  } catch (error) {
    renderTraffic(null);
  }
}

function wireProfiles() {
  $("profile-select").addEventListener("change", (change) => {
    change.target.dataset.touched = "1";
  });
  $("profile-serve").addEventListener("click", () => {
    const name = $("profile-select").value;
    const current = view.status && view.status.serving ? view.status.serving.profile : "?";
    mutate(
      `Serve profile ${name}? The engine (profile ${current}) is stopped cleanly first, then ${name} starts: a cold start takes 20 to 45 minutes.`,
      "/api/v1/serving/switch",
      { profile: name },
      "profile-result",
      (answer) => {
        delete $("profile-select").dataset.touched;
        again("profiles");
        return answer.already_active
          ? `profile ${name} is already in force`
          : `switching to profile ${name}: the engine stops cleanly, then ${name} starts`;
      },
    );
  });
}

// --- history -------------------------------------------------------------------------------

async function pollHistory() {
  const history = await getJson(`/api/v1/history?span=${view.span}`);
  view.charts.draw(history);
}

// --- buttons -------------------------------------------------------------------------------

// True (and the token form shown) when no token is saved; ``resume`` runs once it is.
function needToken(resultId, resume) {
  if (savedToken()) return false;
  view.resume = resume || null;
  $("token-form").hidden = false;
  $("token-input").focus();
  notify("Enter the API token first (it is in <state-dir>/api-token).", true);
  showResult(resultId, "Enter the API token first (the form at the top of the page).", true);
  return true;
}

// Ask, then POST; the answer (or refusal) is shown in ``resultId``, beside the control.
async function mutate(question, path, body, resultId, done) {
  if (needToken(resultId, () => mutate(question, path, body, resultId, done))) return;
  if (!window.confirm(question)) return;
  await post(path, body, resultId, done);
}

async function post(path, body, resultId, done) {
  notify("", false); // the token's "saved" or "enter it first" is old news now
  showResult(resultId, "", false);
  try {
    const answer = await postJson(path, body);
    showResult(resultId, done(answer), false);
  } catch (error) {
    showResult(resultId, isUnreachable(error) ? "the daemon did not answer" : error.message, true);
  }
  again("status");
  again("events");
}

// The reboot button: a refusal because the default boot entry is not the baseline kernel
// (code boot_entry) names the entry; the person may then reboot into it anyway (force).
async function rebootClicked() {
  // A cold power cycle when the latch asks for one ([recovery] power_cycle_command).
  const cold = $("reboot-confirm").dataset.cold === "true";
  const what = cold ? "power cycle" : "reboot";
  const question = `${cold ? "Power-cycle the rig" : "Reboot the host"} now? The engine is stopped cleanly first; the ${what} runs only if that stop succeeds.`;
  if (needToken("reboot-result", () => rebootClicked())) return;
  if (!window.confirm(question)) return;
  notify("", false);
  showResult("reboot-result", "", false);
  try {
    const answer = await postJson("/api/v1/recovery/reboot", { confirm: true, cold });
    showResult("reboot-result", `${what}: ${answer.message || "accepted"}`, false);
  } catch (error) {
    // A wrong boot entry, or a warm reboot while the latch asks for more: the person may
    // go ahead anyway (force), after a second question that names why it was refused.
    if (isUnreachable(error) || !["boot_entry", "cold_advised"].includes(error.code)) {
      showResult("reboot-result", isUnreachable(error) ? "the daemon did not answer" : error.message, true);
    } else {
      showResult("reboot-result", `${what} refused: ${error.message}`, true);
      const anyway = error.code === "boot_entry" ? "into that entry anyway" : "warm anyway";
      if (window.confirm(`${error.message}\n\n${cold ? "Power-cycle" : "Reboot"} ${anyway} (--force)?`)) {
        await post("/api/v1/recovery/reboot", { confirm: true, cold, force: true }, "reboot-result", (answer) => `${what} (forced): ${answer.message || "accepted"}`);
        return;
      }
    }
  }
  again("status");
  again("events");
}

const ENGINE_QUESTIONS = {
  start: "Start the engine?",
  stop: "Stop the engine? Serving stops, and a cold start takes 20 to 45 minutes.",
  restart: "Restart the engine? Serving stops, and a cold start takes 20 to 45 minutes.",
};

function wireButtons() {
  for (const button of document.querySelectorAll("[data-action]")) {
    const action = button.dataset.action;
    button.addEventListener("click", () =>
      mutate(ENGINE_QUESTIONS[action], `/api/v1/serving/${action}`, {}, "engine-result", (answer) => {
        const state = answer.serving ? answer.serving.state : "?";
        const warnings = (answer.warnings || []).map((w) => w.message).join("; ");
        return `${action}: accepted, engine ${state}${warnings ? ` (warnings: ${warnings})` : ""}`;
      }),
    );
  }
  // A side engine's buttons (drawn anew with its box each poll): the action names its engine.
  $("engine-more").addEventListener("click", (click) => {
    const button = click.target.closest ? click.target.closest("[data-engine-action]") : null;
    if (!button || button.disabled) return;
    const action = button.dataset.engineAction;
    const name = button.dataset.engine;
    const question = ENGINE_QUESTIONS[action].replace("the engine", `engine ${name}`);
    mutate(question, `/api/v1/serving/${action}`, { engine: name }, "engine-result", (answer) => {
      const state = answer.serving ? answer.serving.state : "?";
      return `${action} ${name}: accepted, engine ${state}`;
    });
  });
  $("reboot-confirm").addEventListener("click", () => rebootClicked());
  $("reboot-clear").addEventListener("click", function clearClicked() {
    if (needToken("reboot-result", clearClicked)) return;
    const reason = window.prompt(
      "Clear the reboot-required latch WITHOUT a reboot? Only if you know the cards are fine: the faults seen so far then no longer refuse a start (a new one latches again). Why (recorded):",
    );
    if (!reason || !reason.trim()) return;
    post("/api/v1/recovery/clear", { reason: reason.trim() }, "reboot-result", (answer) => `clear: ${answer.message || "done"}`);
  });
  $("event-list").addEventListener("click", (click) => {
    const id = click.target.dataset ? click.target.dataset.ack : undefined;
    if (!id) return;
    mutate(`Acknowledge event ${id}?`, `/api/v1/events/${id}/ack`, {}, "events-result", () => `event ${id} acknowledged`);
  });
  for (const button of document.querySelectorAll("[data-span]")) {
    button.addEventListener("click", () => {
      view.span = button.dataset.span;
      for (const other of document.querySelectorAll("[data-span]")) {
        other.setAttribute("aria-pressed", String(other === button));
      }
      again("history");
    });
  }
  $("event-filters").addEventListener("change", () => again("events"));
  $("cards-view").addEventListener("click", () => {
    const dense = document.getElementById("cards").classList.contains("dense");
    window.localStorage.setItem("cmpfleet.cards-view", dense ? "tiles" : "lines");
    if (view.status) renderCards(view.status);
  });
  $("event-filters").addEventListener("submit", (submit) => submit.preventDefault());
}

function wireToken() {
  const form = $("token-form");
  const input = $("token-input");
  $("token-button").addEventListener("click", () => {
    form.hidden = !form.hidden;
    if (!form.hidden) input.focus();
  });
  form.addEventListener("submit", (submit) => {
    submit.preventDefault();
    saveToken(input.value.trim());
    input.value = "";
    form.hidden = true;
    notify(savedToken() ? "API token saved in this browser." : "", false);
    for (const box of document.querySelectorAll(".result")) showResult(box.id, "", false);
    again("log");
    // The action that asked for the token goes on from where it stopped (its question).
    const resume = view.resume;
    view.resume = null;
    // After this event, so the form is gone before the action's question shows.
    if (resume && savedToken()) window.setTimeout(resume, 0);
  });
  $("token-forget").addEventListener("click", () => {
    view.resume = null;
    saveToken("");
    form.hidden = true;
    notify("API token forgotten.", false);
    again("log");
  });
}

async function start() {
  const kinds = $("filter-kind");
  for (const kind of EVENT_KINDS) kinds.append(new Option(kind, kind));
  $("time-zone").textContent = `times in ${zoneLabel(new Date())}`;
  renderControls(null); // nothing is enabled before the daemon has said what can succeed
  wireButtons();
  wireProfiles();
  wireToken();
  // Where each check is drawn comes from the daemon (its specs), before the first status;
  // a refusal (the token not saved yet) is asked again with each status.
  await askCheckSpecs().catch(() => {});
  openStream();
  every("status", () => STATUS_EVERY_MS, pollStatus);
  every("events", () => EVENTS_EVERY_MS, pollEvents);
  every("log", () => LOG_EVERY_MS, pollLog);
  every("history", () => HISTORY_EVERY_MS[view.span], pollHistory);
  every("profiles", () => PROFILES_EVERY_MS, pollProfiles);
  every("traffic", () => TRAFFIC_EVERY_MS, pollTraffic);
  every("crashes", () => CRASHES_EVERY_MS, pollCrashes);
  every("bench", () => BENCH_EVERY_MS, pollBench);
  // The engine's uptime and the canaries' ages tick between polls too.
  window.setInterval(() => {
    if (!view.status) return;
    renderEngines(view.status, Date.now());
    renderCanaries(view.status, Date.now());
  }, 1000);
}

// uPlot is a deferred classic script: it has run before module scripts execute.
start();
