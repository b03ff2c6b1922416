import { readdirSync, readFileSync } from 'node:fs';

/** What svc reads of a process in /proc/<pid>/stat: its state, its process group and when it started. */
export interface ProcStat {
  state: string;
  pgrp: number;
  /** clock ticks after boot: with the boot id, what tells this process from a later one given the same pid */
  start: number;
}

/** A process's state, group and start time, or null when it is gone (or there is no /proc). */
export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  // the name in parentheses may hold spaces and parentheses itself: the fields start after the last ')'
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[19]);
  const pgrp = Number(fields[2]);
  if (!fields[0] || !Number.isFinite(start) || !Number.isFinite(pgrp)) return null;
  return { state: fields[0], pgrp, start };
}

/** This boot's id, or null where the system has none to read (no /proc). */
export function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').trim() || null;
  } catch {
    return null;
  }
}

/** Whether this system has /proc to read processes from. */
export function hasProc(): boolean {
  return readProcStat(process.pid) !== null;
}

/** The processes of a group that still run (zombies, which are only waiting to be reaped, apart). */
export function groupMembers(pgid: number): { pid: number; start: number }[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: { pid: number; start: number }[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat && stat.pgrp === pgid && stat.state !== 'Z' && stat.state !== 'X') out.push({ pid: Number(name), start: stat.start });
  }
  return out;
}

/** Sends a signal to a whole process group; false when there is no such group. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  // never group 0 (svc's own) or -1 (every process svc may signal)
  if (!Number.isSafeInteger(pgid) || pgid <= 1) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    // ESRCH: no such group; EPERM: another user's, which svc cannot have started
    return false;
  }
}

/** Whether any process of the group still runs. */
export function groupAlive(pgid: number): boolean {
  if (!signalGroup(pgid, 0)) return false;
  // the group answers a signal while a zombie of it waits to be reaped: /proc tells them apart
  return hasProc() ? groupMembers(pgid).length > 0 : true;
}

/** How long a group gets after TERM before KILL, and how long after KILL svc waits for it to go. */
export const TERM_GRACE_MS = 1500;
const KILL_WAIT_MS = 400;
const POLL_MS = 25;

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * Ends a process group: TERM to every process of it, then KILL to what is left after the grace.
 * Resolves once none of it runs (or the short wait after KILL has passed).
 */
export async function endGroup(pgid: number, graceMs = TERM_GRACE_MS): Promise<void> {
  if (!signalGroup(pgid, 'SIGTERM')) return;
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    await pause(POLL_MS);
    if (!groupAlive(pgid)) return;
  }
  signalGroup(pgid, 'SIGKILL');
  const last = Date.now() + KILL_WAIT_MS;
  while (Date.now() < last && groupAlive(pgid)) await pause(POLL_MS);
}
