/**
 * The results as a picture: an SVG of two bar charts, median requests/s and median p99 latency,
 * one group of bars per scenario and one bar per target, written by hand (no dependency).
 */

export interface ChartTarget {
  readonly name: string;
  readonly rps: number;
  readonly p99Ms: number;
}

export interface ChartScenario {
  readonly id: string;
  /** A short line under the group, e.g. "default 0.52x baseline". */
  readonly note: string;
  readonly targets: readonly ChartTarget[];
}

const PALETTE: Readonly<Record<string, string>> = {
  ceiling: '#9e9e9e',
  baseline: '#1f4e79',
  'baseline-2': '#5b8db8',
  default: '#e67e22',
  tracing: '#27ae60',
  'no-rate-limit': '#8e44ad',
  'workers-1': '#e67e22',
  'workers-2': '#c0392b',
};
const EXTRA_COLOURS = ['#16a085', '#d35400', '#2c3e50', '#7f8c8d', '#f1c40f'];

const BAR = 16;
const GROUP_GAP = 28;
const LEFT = 70;
const PANEL_HEIGHT = 220;
const LABEL_HEIGHT = 78;
/** A group is at least this wide, so that its labels do not run into the next group's. */
const MIN_GROUP = 112;

const groupWidth = (scenario: ChartScenario) => Math.max(scenario.targets.length * BAR, MIN_GROUP);

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function colourOf(name: string, extras: Map<string, string>): string {
  const known = PALETTE[name];
  if (known !== undefined) return known;
  if (!extras.has(name)) extras.set(name, EXTRA_COLOURS[extras.size % EXTRA_COLOURS.length]!);
  return extras.get(name)!;
}

/** A round axis maximum and its tick step. */
function niceScale(max: number): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 0.25 };
  const magnitude = 10 ** Math.floor(Math.log10(max));
  const step = [0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10].map((f) => f * magnitude).find((s) => max / s <= 6)!;
  return { top: Math.ceil(max / step) * step, step };
}

function formatTick(value: number, unit: 'rps' | 'ms'): string {
  if (unit === 'rps') return value >= 1000 ? `${+(value / 1000).toFixed(1)}k` : `${value}`;
  return `${+value.toFixed(2)}`;
}

interface Panel {
  readonly title: string;
  readonly unit: 'rps' | 'ms';
  readonly value: (t: ChartTarget) => number;
}

/** The generator's own ceiling: far above the targets, so it does not set the scale (its bars are cut, and labelled). */
const UNSCALED = new Set(['ceiling']);
/** Room above the tallest bar for its value label. */
const HEADROOM = 1.25;

function drawPanel(
  panel: Panel,
  scenarios: readonly ChartScenario[],
  top: number,
  width: number,
  colours: (n: string) => string,
): string[] {
  const values = scenarios
    .flatMap((s) => s.targets.filter((t) => !UNSCALED.has(t.name)).map(panel.value))
    .filter(Number.isFinite);
  const { top: max, step } = niceScale(Math.max(0, ...values) * HEADROOM);
  const y = (v: number) => top + PANEL_HEIGHT - (Math.min(v, max) / max) * PANEL_HEIGHT;
  const out = [`<text x="${LEFT}" y="${top - 10}" class="title">${escape(panel.title)}</text>`];
  for (let tick = 0; tick <= max + step / 2; tick += step) {
    out.push(`<line x1="${LEFT}" x2="${width - 10}" y1="${y(tick)}" y2="${y(tick)}" class="grid"/>`);
    out.push(`<text x="${LEFT - 6}" y="${y(tick) + 4}" class="tick">${formatTick(tick, panel.unit)}</text>`);
  }
  let x = LEFT + GROUP_GAP / 2;
  for (const scenario of scenarios) {
    const slot = x;
    x += (groupWidth(scenario) - scenario.targets.length * BAR) / 2;
    for (const target of scenario.targets) {
      const v = panel.value(target);
      if (Number.isFinite(v)) {
        const title = `${scenario.id} ${target.name}: ${formatValue(v, panel.unit)}`;
        out.push(...drawBar(x, y(v), top, v > max, v, panel.unit, colours(target.name), title));
      }
      x += BAR;
    }
    x = slot + groupWidth(scenario) + GROUP_GAP;
  }
  return out;
}

/** One bar from the axis up to `barTop`, its value written up its length; a bar past the axis's top is cut. */
function drawBar(
  x: number,
  barTop: number,
  panelTop: number,
  cut: boolean,
  value: number,
  unit: 'rps' | 'ms',
  colour: string,
  title: string,
): string[] {
  const bottom = panelTop + PANEL_HEIGHT;
  const h = Math.max(1, bottom - barTop);
  const text = formatValue(value, unit);
  const out = [
    `<rect x="${x}" y="${bottom - h}" width="${BAR - 2}" height="${h}" fill="${colour}"><title>${escape(title)}</title></rect>`,
  ];
  if (cut) {
    // Two white strokes across the bar: it goes on beyond the axis.
    for (const dy of [8, 13]) {
      out.push(`<line x1="${x - 1}" x2="${x + BAR - 1}" y1="${barTop + dy + 3}" y2="${barTop + dy}" class="cut"/>`);
    }
  }
  // Inside a cut bar (white), above any other (dark).
  const [tx, ty] = [x + (BAR - 2) / 2 + 3, cut ? barTop + 20 : barTop - 3];
  out.push(
    `<text x="${tx}" y="${ty}" transform="rotate(-90 ${tx} ${ty})" class="${cut ? 'value cutvalue' : 'value'}"${cut ? ' text-anchor="end"' : ''}>${escape(text)}</text>`,
  );
  return out;
}

/** A bar's value as its label shows it: 15.4k req/s, 3.17 ms. */
function formatValue(value: number, unit: 'rps' | 'ms'): string {
  if (unit === 'rps') return value >= 1000 ? `${(value / 1000).toFixed(1)}k` : `${Math.round(value)}`;
  return value >= 100 ? `${Math.round(value)}` : `${+value.toFixed(value >= 10 ? 1 : 2)}`;
}

function drawLabels(scenarios: readonly ChartScenario[], top: number): string[] {
  const out: string[] = [];
  let x = LEFT + GROUP_GAP / 2;
  for (const scenario of scenarios) {
    const centre = x + groupWidth(scenario) / 2;
    const [backend, ...rest] = scenario.id.split('-');
    const lines = [backend!, rest.slice(0, -1).join('-'), rest.at(-1)!, scenario.note];
    lines.forEach((line, i) => {
      out.push(
        `<text x="${centre}" y="${top + 14 + i * 14}" class="${i === 3 ? 'note' : 'label'}">${escape(line)}</text>`,
      );
    });
    x += groupWidth(scenario) + GROUP_GAP;
  }
  return out;
}

function drawLegend(names: readonly string[], colours: (n: string) => string): string[] {
  return names.flatMap((name, i) => {
    const x = LEFT + i * 130;
    return [
      `<rect x="${x}" y="46" width="12" height="12" fill="${colours(name)}"/>`,
      `<text x="${x + 18}" y="56" class="legend">${escape(name)}</text>`,
    ];
  });
}

/** The SVG document for `scenarios`, titled `title` and subtitled `subtitle`. */
export function renderChart(title: string, subtitle: string, scenarios: readonly ChartScenario[]): string {
  const extras = new Map<string, string>();
  const colours = (name: string) => colourOf(name, extras);
  const groups = scenarios.reduce((sum, s) => sum + groupWidth(s) + GROUP_GAP, 0);
  const width = Math.max(760, LEFT + groups + 20);
  const names = [...new Set(scenarios.flatMap((s) => s.targets.map((t) => t.name)))];
  const rpsTop = 100;
  const p99Top = rpsTop + PANEL_HEIGHT + LABEL_HEIGHT + 40;
  const height = p99Top + PANEL_HEIGHT + LABEL_HEIGHT;
  const body = [
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="${LEFT}" y="18" class="heading">${escape(title)}</text>`,
    `<text x="${LEFT + 2}" y="36" class="sub">${escape(subtitle)}</text>`,
    ...drawLegend(names, colours),
    ...drawPanel(
      {
        title: "requests/s (median of rounds; higher is better; the ceiling's bars are cut at the axis)",
        unit: 'rps',
        value: (t) => t.rps,
      },
      scenarios,
      rpsTop,
      width,
      colours,
    ),
    ...drawLabels(scenarios, rpsTop + PANEL_HEIGHT),
    ...drawPanel(
      { title: 'p99 latency, ms (median of rounds; lower is better)', unit: 'ms', value: (t) => t.p99Ms },
      scenarios,
      p99Top,
      width,
      colours,
    ),
    ...drawLabels(scenarios, p99Top + PANEL_HEIGHT),
  ];
  const style = `<style>
text { font-family: DejaVu Sans, Arial, sans-serif; fill: #222; }
.heading { font-size: 16px; font-weight: bold; }
.sub { font-size: 11px; fill: #555; }
.title { font-size: 13px; font-weight: bold; }
.tick { font-size: 10px; text-anchor: end; fill: #555; }
.label { font-size: 10px; text-anchor: middle; }
.note { font-size: 9px; text-anchor: middle; fill: #a33; }
.legend { font-size: 11px; }
.grid { stroke: #e3e3e3; stroke-width: 1; }
.value { font-size: 9px; fill: #333; }
.cutvalue { fill: #fff; font-weight: bold; }
.cut { stroke: #fff; stroke-width: 2; }
</style>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">\n${style}\n${body.join('\n')}\n</svg>\n`;
}
