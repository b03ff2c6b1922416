import type { Logger } from '../../log.js';
import { endGroup, groupMembers, readProcStat } from './proc.js';
import { readRecord, type RecordedChild } from './record.js';

/**
 * Whether a recorded group is still the one svc started. Its leader, when it runs, must have the
 * recorded start time (a later process given the same pid is not ours). When the leader is gone
 * but processes of its group run, the group is ours: Linux gives no process a pid that is still
 * some group's id, so the group cannot be another's; its members started after the leader.
 */
export function stillOurs(child: RecordedChild): boolean {
  if (child.start === null) return false;
  const leader = readProcStat(child.pid);
  if (leader && leader.state !== 'Z') return leader.start === child.start && leader.pgrp === child.pgid;
  return groupMembers(child.pgid).some((m) => m.start >= child.start!);
}

/**
 * At a start, ends the process groups that the record says a previous svc started and that
 * still run (a svc killed with SIGKILL whose watchdog was killed too, or children that ignore both
 * stdin closing and SIGTERM): TERM, then KILL after the grace. Answers how many groups it ended.
 */
export async function reapRecorded(file: string, logger: Logger): Promise<number> {
  const recorded = await readRecord(file, logger);
  const ours = recorded.filter(stillOurs);
  await Promise.all(ours.map((c) => endGroup(c.pgid)));
  for (const c of ours) logger.warn({ pid: c.pid, mcp_instance: c.instance, since: c.at }, 'ended a command server left running by an earlier svc');
  return ours.length;
}
