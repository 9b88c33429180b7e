// Order statistics for the bench's reports. Every figure the bench prints is a median of rounds (or of
// samples) with its spread beside it, so one noisy round on a shared machine cannot pass for a result.

export function quantile(values, q) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return sorted[low] + (sorted[high] - sorted[low]) * (at - low);
}

export const median = (values) => quantile(values, 0.5);

/** Median and min–max of a set of round results. */
export function summarize(values) {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), n: values.length };
}

/**
 * Ratio of two contenders measured in the same rounds: the median of the per-round ratios, so a slow
 * round that hit both alike cancels out, with the min–max of those per-round ratios as its spread.
 */
export function pairedRatio(numerators, denominators) {
  const ratios = numerators.map((value, i) => value / denominators[i]).filter(Number.isFinite);
  return ratios.length === 0 ? { median: NaN, min: NaN, max: NaN, n: 0 } : summarize(ratios);
}

export function fmt(value, digits = 0) {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

/** "1234 [1180–1302]": a median with its spread. */
export function withSpread(stat, digits = 0) {
  if (!stat || !Number.isFinite(stat.median)) return "n/a";
  if (stat.n <= 1) return fmt(stat.median, digits);
  return `${fmt(stat.median, digits)} [${fmt(stat.min, digits)}–${fmt(stat.max, digits)}]`;
}

export function ratioText(stat) {
  return Number.isFinite(stat?.median) ? `${withSpread(stat, 2)}×` : "n/a";
}
