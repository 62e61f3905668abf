// The dashboard's one time format: ISO-like, to the second, in the browser's zone, with the
// zone written out ("2026-12-03 14:05:09 UTC+01:00"). Events, the latch and the charts all
// use it, so a time read off a chart is the same text as in the timeline; a locale format
// without a zone could not be compared with the CLI's ISO 8601 times or another person's.

const pad = (value) => String(value).padStart(2, "0");

// "UTC+01:00" for the zone this browser is in at ``date`` (summer time included).
export function zoneLabel(date) {
  const east = -(date || new Date()).getTimezoneOffset();
  const sign = east < 0 ? "-" : "+";
  const minutes = Math.abs(east);
  return `UTC${sign}${pad(Math.floor(minutes / 60))}:${pad(minutes % 60)}`;
}

export function dayOf(date) {
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

export function clockOf(date) {
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

// ``when``: an ISO string, epoch milliseconds or a Date; unreadable input is shown as it came.
export function formatTime(when) {
  const date = when instanceof Date ? when : new Date(when);
  if (Number.isNaN(date.getTime())) return String(when);
  return `${dayOf(date)} ${clockOf(date)} ${zoneLabel(date)}`;
}

// A chart's tick labels (epoch seconds): the clock, with the day above the first tick and
// above each tick on a new day, so the axis reads like the full format without repeating it.
export function tickLabels(splits) {
  let lastDay = null;
  return splits.map((seconds) => {
    const date = new Date(seconds * 1000);
    const day = dayOf(date);
    const label = day === lastDay ? clockOf(date) : `${day}\n${clockOf(date)}`;
    lastDay = day;
    return label;
  });
}
