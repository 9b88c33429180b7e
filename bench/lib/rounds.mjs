// Interleaved rounds: every contender runs once per round, in an order rotated each round, after a
// warm-up round whose results are dropped. Drift on a shared machine (other processes, etcd compaction,
// GC) then hits every contender alike instead of whichever happened to run during it.

/**
 * `measure(contender, round)` returns one round's result for that contender (any value). A throw is kept
 * as `{ error }` for that round, so one failing contender never stops the others. Returns name → results.
 */
export async function interleaved(contenders, rounds, measure, { warmup = 1 } = {}) {
  const results = new Map(contenders.map((c) => [c.name, []]));
  for (let round = -warmup; round < rounds; round++) {
    const start = round + warmup;
    for (let i = 0; i < contenders.length; i++) {
      const contender = contenders[(start + i) % contenders.length];
      let result;
      try {
        result = await measure(contender, round);
      } catch (error) {
        result = { error };
      }
      if (round >= 0) results.get(contender.name).push(result);
    }
  }
  return results;
}

/** The numbers among a contender's round results (failed rounds left out) and the first failure, if any. */
export function numbersOf(results, pick = (r) => r) {
  const values = [];
  let error;
  for (const result of results ?? []) {
    if (result?.error !== undefined) error ??= result.error;
    else values.push(pick(result));
  }
  return { values, error };
}
