import os from 'node:os';

/** The names of svc's own environment a command server gets: where programs are, home, locale, time zone, temp dir. */
const PASSED = ['PATH', 'HOME', 'LANG', 'LANGUAGE', 'TZ', 'TMPDIR'] as const;

/** Used when svc itself runs with no PATH, so a command named without a path is still found. */
export const FALLBACK_PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * The whole environment of a command server: PATH, HOME, the locale (LANG, LANGUAGE, LC_*), TZ and
 * TMPDIR taken from svc's, then the instance's own variables over them. Nothing else of svc's
 * environment is passed: no SVC_* variable, master key, database URL or provider key, whatever
 * svc was started with. Only names and values that a process environment can hold are kept.
 */
export function minimalEnv(own: Record<string, string>, parent: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASSED) {
    const value = parent[name];
    if (value !== undefined && value !== '') env[name] = value;
  }
  for (const [name, value] of Object.entries(parent)) {
    if (/^LC_[A-Z_]+$/.test(name) && value !== undefined) env[name] = value;
  }
  env.PATH ??= FALLBACK_PATH;
  env.HOME ??= os.homedir();
  for (const [name, value] of Object.entries(own)) {
    if (!validName(name) || value.includes('\0')) continue;
    env[name] = value;
  }
  return env;
}

/** A name a process environment can hold: not empty, no `=` and no NUL. */
const validName = (name: string) => name.length > 0 && !name.includes('=') && !name.includes('\0');
