// The engine's buttons follow the rig's state: each is enabled only when its action can
// succeed now, and a disabled one says why (its title, and one visible line for touch
// screens, which show no tooltips). The daemon still decides: a refusal it answers is shown
// beside the button that asked (``showResult``), not at the top of the page.

const WAIT = "waiting for the daemon";

// Why each action cannot succeed now ({start, stop, restart, serve}: a reason, or null), for
// ``engine`` (an entry of the status's `engines`; the primary, `serving`, when not given).
export function blockedActions(status, engine) {
  if (!status || !status.serving) return { start: WAIT, stop: WAIT, restart: WAIT, serve: WAIT };
  const s = engine || status.serving;
  const recovery = status.recovery || {};
  if (s.profile === null || s.profile === undefined) {
    const none = "no engine is configured on this rig ([serving] in the config)";
    return { start: none, stop: none, restart: none, serve: none };
  }
  const why = { start: null, stop: null, restart: null, serve: null };
  switch (s.state) {
    case "ready":
    case "unhealthy":
      why.start = "the engine runs already (Restart restarts it)";
      break;
    case "starting":
      why.start = "the engine is starting";
      why.restart = "the engine is starting: wait until it is ready, or stop it";
      break;
    case "stopping":
      why.start = "the engine is stopping: wait until it has stopped";
      why.restart = why.start;
      why.stop = "the engine is stopping already";
      why.serve = why.start;
      break;
    case "held":
      // The crash breaker holds it: a person's Start is the way out (it starts over).
      why.stop = "no engine runs (the crash breaker holds it: Start starts it again)";
      why.restart = "no engine runs: Start starts it";
      break;
    case "stopped":
    case "failed":
      why.stop = "the engine is stopped";
      why.restart = "the engine is stopped: Start starts it";
      break;
    default: // backoff: Stop cancels the pending restart, Start starts now
      break;
  }
  if (s.switch && ["stopping", "starting"].includes(s.switch.phase)) {
    const switching = `switching to profile ${s.switch.profile}: wait until it ends`;
    why.start = why.start || switching;
    why.restart = why.restart || switching;
    why.serve = switching;
  }
  const gated = (s.start_blocked || []).filter((r) => r.code !== "reboot_latch");
  if (gated.length) {
    // The start gate would refuse a start of this profile now (a critical check on its
    // cards, its lint errors, a diagnostic holding the cards): Serve may pick another.
    const refused = `the start gate refuses: ${gated.map((r) => r.message).join("; ")}`;
    why.start = why.start || refused;
    why.restart = why.restart || refused;
  }
  if (recovery.reboot_required) {
    // The start gate refuses every start while the latch is set, whatever the engine does.
    const latched = `reboot required (${recovery.reason || "see the reboot prompt"}): reboot or clear the latch first`;
    why.start = latched;
    why.restart = latched;
    why.serve = latched;
  }
  return why;
}

// Why the reboot prompt's button cannot do what it says (null: it can).
export function blockedReboot(status) {
  const recovery = (status && status.recovery) || {};
  const cold = Boolean(recovery.advice_kind) && recovery.advice_kind !== "warm_reboot";
  if (cold && recovery.power_cycle === false) {
    return "no [recovery] power_cycle_command on this rig: switch it off for about 30 s by hand, then on";
  }
  return null;
}

export function gate(button, reason) {
  button.disabled = Boolean(reason);
  if (reason) button.title = reason;
  else button.removeAttribute("title");
}

// Enable or disable the engine's buttons and the profile switch for ``status``.
export function renderControls(status) {
  const why = blockedActions(status);
  for (const button of document.querySelectorAll("[data-action]")) gate(button, why[button.dataset.action]);
  gate(document.getElementById("profile-serve"), why.serve);
  // When the gate or the latch keeps Start off, the reason is also one visible line (the
  // other states show in the engine's own facts): a phone shows no tooltip.
  const stopped = status && status.serving && !["ready", "starting", "unhealthy", "stopping"].includes(status.serving.state);
  const gated = Boolean(status && status.recovery && status.recovery.reboot_required) ||
    Boolean(stopped && why.start && (status.serving.start_blocked || []).length);
  const line = document.getElementById("engine-why-not");
  line.textContent = gated ? `Start and Restart are off: ${why.start}.` : "";
  line.hidden = !gated;
  const reboot = document.getElementById("reboot-confirm");
  const cannot = blockedReboot(status);
  gate(reboot, cannot);
  const rebootLine = document.getElementById("reboot-why-not");
  rebootLine.textContent = cannot ? `The power-cycle button is off: ${cannot}.` : "";
  rebootLine.hidden = !cannot;
}

// What an action answered, shown in the box beside its control (``id``) until the next one.
export function showResult(id, text, isError) {
  const box = document.getElementById(id);
  if (!box) return;
  box.textContent = text;
  box.classList.toggle("error", Boolean(isError));
  box.hidden = !text;
}
