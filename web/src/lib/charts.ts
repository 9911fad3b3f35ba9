import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartConfiguration,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from 'chart.js';

/**
 * Chart.js with only the parts the statistics page draws (a line over time, horizontal bars, their
 * axes, tooltip and legend), so the bundle carries nothing else of it.
 */
Chart.register(
  LineController,
  LineElement,
  PointElement,
  Filler,
  BarController,
  BarElement,
  CategoryScale,
  LinearScale,
  Tooltip,
  Legend,
);

export { Chart };

/** The page's colours (they follow the light or dark scheme), read from its CSS custom properties. */
export function themeColours(element: Element) {
  const style = getComputedStyle(element);
  const read = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  return {
    accent: read('--accent', '#1f5fbf'),
    warn: read('--warn', '#8a5a00'),
    fg: read('--fg', '#1b1d22'),
    muted: read('--muted', '#5a606b'),
    line: read('--line', '#d5d8de'),
  };
}
export type ThemeColours = ReturnType<typeof themeColours>;

/** Options every chart of the page shares: no animation (nothing moves for those who asked for less), themed axes. */
export function baseOptions(colours: ThemeColours): NonNullable<ChartConfiguration['options']> {
  return {
    responsive: true,
    maintainAspectRatio: false,
    animation: false,
    color: colours.fg,
    scales: {
      x: { ticks: { color: colours.muted }, grid: { color: colours.line } },
      y: { ticks: { color: colours.muted, precision: 0 }, grid: { color: colours.line }, beginAtZero: true },
    },
  };
}

/** A `#rrggbb` colour at `alpha` opacity; any other colour as it is. */
export const withAlpha = (colour: string, alpha: number) =>
  /^#[0-9a-f]{6}$/i.test(colour)
    ? `${colour}${Math.round(alpha * 255)
        .toString(16)
        .padStart(2, '0')}`
    : colour;

/** Long axis labels (a referrer's host) shortened on the axis; the tooltip and the table keep them whole. */
export const shorten = (text: string, max = 18) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** Visits and bots over time: a filled line for visits, a dashed one for bots. */
export function seriesChart(
  labels: string[],
  visits: number[],
  bots: number[],
  colours: ThemeColours,
): ChartConfiguration<'line'> {
  const dots = labels.length <= 45 ? 3 : 0;
  return {
    type: 'line',
    data: {
      labels,
      datasets: [
        {
          label: 'Visits',
          data: visits,
          borderColor: colours.accent,
          backgroundColor: withAlpha(colours.accent, 0.18),
          fill: true,
          tension: 0.25,
          pointRadius: dots,
        },
        {
          label: 'Bots',
          data: bots,
          borderColor: colours.warn,
          backgroundColor: colours.warn,
          borderDash: [5, 4],
          fill: false,
          tension: 0.25,
          pointRadius: dots,
        },
      ],
    },
    options: {
      ...(baseOptions(colours) as ChartConfiguration<'line'>['options']),
      interaction: { mode: 'index', intersect: false },
      plugins: { legend: { labels: { color: colours.fg, usePointStyle: true } } },
    },
  };
}

/** The top entries of one kind as horizontal bars, most visits first. */
export function topChart(labels: string[], visits: number[], colours: ThemeColours): ChartConfiguration<'bar'> {
  const base = baseOptions(colours) as NonNullable<ChartConfiguration<'bar'>['options']>;
  return {
    type: 'bar',
    data: {
      labels,
      datasets: [{ label: 'Visits', data: visits, backgroundColor: colours.accent, maxBarThickness: 22 }],
    },
    options: {
      ...base,
      indexAxis: 'y',
      plugins: { legend: { display: false } },
      scales: {
        x: { ticks: { color: colours.muted, precision: 0 }, grid: { color: colours.line }, beginAtZero: true },
        y: {
          grid: { display: false },
          ticks: {
            color: colours.fg,
            callback(value) {
              return shorten(this.getLabelForValue(Number(value)));
            },
          },
        },
      },
    },
  };
}
