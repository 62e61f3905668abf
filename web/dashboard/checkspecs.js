// The checks as fleetd declares them (GET /api/v1/checks: each check's spec), asked once:
// the dashboard keeps no check ids of its own. A place that shows a check's severity beside
// its reading (a tile's power, the Host panel's kernel) asks ``checkAt(place)`` which check
// that is; the places are the specs' ``drawn_at`` words (hwcheck/checks/spec.py DrawnAt).

import { getJson } from "./api.js";

let specs = null; // the answer's checks, once known
let asking = null; // the request in flight

// Ask for the specs unless known or asked; ``redraw`` runs once they arrive. A failure
// (a listener beyond loopback before the token is saved) is asked again next time.
export function askCheckSpecs(redraw) {
  if (specs !== null) return Promise.resolve();
  if (asking === null) {
    asking = getJson("/api/v1/checks")
      .then((document_) => {
        specs = document_.checks || [];
        if (redraw) redraw();
      })
      .finally(() => {
        asking = null;
      });
  }
  return asking;
}

export function checkSpecsKnown() {
  return specs !== null;
}

// The id of the check drawn at ``place`` (null until the specs are known, or none there).
export function checkAt(place) {
  const found = (specs || []).find((spec) => spec.drawn_at === place);
  return found ? found.id : null;
}

// The tags of the checks drawn at ``places`` (a tile's badges that already say them).
export function tagsAt(places) {
  return new Set((specs || []).filter((spec) => places.includes(spec.drawn_at)).map((spec) => spec.tag));
}

// The ids of the checks the Host panel judges (null until the specs are known).
export function hostPanelChecks() {
  if (specs === null) return null;
  return new Set(specs.filter((spec) => spec.host_panel).map((spec) => spec.id));
}

// The checks of ``status`` that ``place`` shows (none until the specs are known).
export function checksAt(checks, place) {
  const id = checkAt(place);
  return id === null ? [] : (checks || []).filter((check) => check.id === id);
}
