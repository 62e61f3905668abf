// The two helpers every renderer shares: build an element from plain text (textContent
// only, never innerHTML: a log line or event message can never become markup) and write a
// number with its unit.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const numberFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

export function num(value, unit) {
  if (value === null || value === undefined) return "n/a";
  return unit ? `${numberFormat.format(value)} ${unit}` : numberFormat.format(value);
}
