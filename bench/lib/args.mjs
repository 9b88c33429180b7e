// The flags of the by-hand bench scripts (ab, cold-profile, floor-gap): `--name value` on their command line.

/** The value after `--name` in this process's arguments, or `def` when the flag is absent. */
export function flagValue(name, def) {
  const args = process.argv.slice(2);
  const at = args.indexOf(`--${name}`);
  return at < 0 ? def : args[at + 1];
}
