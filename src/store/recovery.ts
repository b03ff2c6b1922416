import path from 'node:path';
import { CorruptStoreError, RUN, shellQuote } from './durable-file.js';
import { SEQ_FILE } from './seq-file.js';

/*
 * What a refused start says: which file is wrong, what is lost by each way out, and, last, the
 * way out that loses least as one shell command line after "Run: " (so a person can paste it,
 * and a test can run it). One line in all: the CLI prints messages with their control
 * characters, newlines too, neutralised. No way out ever starts a store over while acknowledged
 * changes exist.
 */

const NOTHING_CHANGED = 'svc will not start, and has changed no file.';
const commands = (lines: string[]) => `${RUN}${lines.join(' && ')}`;
const moveAside = (file: string, suffix = '.damaged') => `mv ${shellQuote(file)} ${shellQuote(`${file}${suffix}`)}`;
const changes = (from: number, to: number) => (from === to ? `change ${from}` : `changes ${from} to ${to} (${to - from + 1} changes)`);

export interface JournalRef {
  first: number;
  file: string;
}

/** Where the store stood when a journal line did not check out. */
export interface DamagedLine {
  journal: JournalRef;
  /** 1-based */
  line: number;
  /** where the line starts in its file, in bytes */
  offset: number;
  /** the change the line held, from its place in the file */
  seq: number;
  /** the last change db.json holds */
  snapshotSeq: number;
  /** the last change of the damaged file (from its other lines, or where the next file starts) */
  fileLast: number;
  /** the journal files after the damaged one */
  later: JournalRef[];
  /** the last change anything here shows was made: the journal's last good line, or db.seq */
  lastKnown: number;
  /** what db.seq records, null when there is none */
  recorded: number | null;
  dataDir: string;
}

export function damagedLine(d: DamagedLine): CorruptStoreError {
  const head = `The store's journal ${d.journal.file} is damaged: line ${d.line} does not check out (it held change ${d.seq}). ${NOTHING_CHANGED}`;
  return new CorruptStoreError(d.journal.file, `journal line ${d.line} does not check out`, undefined, `${head} ${damagedWayOut(d)}`);
}

/**
 * A journal line that checks out but is not this store's (journal.ts): it names another store
 * than the snapshot (`store`), it follows another change than the line before it (`line`) or
 * than the snapshot (`after-snapshot`), or it is the change the snapshot ends at and not the one
 * the snapshot names (`snapshot`).
 */
export function unlinkedLine(d: DamagedLine & { against: 'store' | 'other-file' | 'line' | 'after-snapshot' | 'snapshot'; storeFile: string; hasBackup: boolean }): CorruptStoreError {
  const store = path.basename(d.storeFile);
  const where = {
    line: `it follows another change ${d.seq - 1} than this store's: the file was copied in from another data dir, or a file before it was replaced`,
    'after-snapshot': `it follows another change ${d.seq - 1} than the one ${d.storeFile} holds: one of the two was copied in from another data dir, or ${store} was put back from another time`,
    snapshot: `it is not the change ${d.seq} that ${d.storeFile} holds: one of the two was copied in from another data dir, or ${store} was put back from another time`,
    store: `it was written by another store than ${d.storeFile} (each names the store it belongs to), and no journal line here names the store ${store} names: one of the two was copied in from another data dir`,
    'other-file': `it was written by another store than ${d.storeFile} and the rest of this store's journal (each names the store it belongs to): the file was copied in from another data dir`,
  }[d.against];
  const head = `The store's journal ${d.journal.file} does not belong with the rest of the store: line ${d.line} (change ${d.seq}) checks out, but ${where}. ${NOTHING_CHANGED}`;
  // which of the journal file and db.json is the stranger cannot be told
  if (d.against === 'snapshot' || d.against === 'store') {
    return new CorruptStoreError(d.journal.file, `journal line ${d.line} is another store's change`, undefined, `${head} ${snapshotDisagrees(d.journal.file, d.storeFile, d.snapshotSeq, d.hasBackup)}`);
  }
  return new CorruptStoreError(d.journal.file, `journal line ${d.line} follows another store's change`, undefined, `${head} If you know which file belongs here, put it back and start again. ${damagedWayOut(d, `Change ${d.seq} is not this store's.`)}`);
}

/** How to put this store's db.json back from its db.json.bak, keeping the other one aside (not run: offered). */
function putBackFromBak(storeFile: string): string {
  const store = path.basename(storeFile);
  return `put this store's back: ${store}.bak is its last good copy, and the journal beside it replays every later change (keep the other ${store} aside: ${moveAside(storeFile, '.other')} && cp ${shellQuote(`${storeFile}.bak`)} ${shellQuote(storeFile)}). `;
}

/**
 * db.json and db.json.bak name two different stores, and no journal line names db.json's (every
 * line left was written by an older svc, which names none, or there is none): one of the two came
 * from another data dir, and which cannot be told, so no way out is offered as the one to run.
 */
export function snapshotsOfTwoStores(opts: { storeFile: string; snapshotSeq: number }): CorruptStoreError {
  const { storeFile } = opts;
  const store = path.basename(storeFile);
  const backup = `${storeFile}.bak`;
  return new CorruptStoreError(
    storeFile,
    `it names another store than ${store}.bak`,
    undefined,
    `The store's snapshot ${storeFile} and its copy ${backup} name two different stores (each names the store it belongs to), and no journal line here names the store ${store} names (lines an older svc wrote name none): one of the two was copied in from another data dir. ${NOTHING_CHANGED} ` +
      `svc cannot tell which of the two is this store's. If ${store} is the one that came from elsewhere, ${putBackFromBak(storeFile)}` +
      `If ${store}.bak is the one that came from elsewhere, move it aside (${store} holds this store's changes up to change ${opts.snapshotSeq}): ${moveAside(backup, '.other')}.`,
  );
}

/**
 * The journal and db.json disagree about the change db.json ends at. Which of the two is this
 * store's cannot be told from them, and either way out loads the other one's store, so none is
 * offered as the one to run.
 */
function snapshotDisagrees(journal: string, storeFile: string, snapshotSeq: number, hasBackup: boolean): string {
  const store = path.basename(storeFile);
  const putBack = hasBackup ? putBackFromBak(storeFile) : `there is no ${store}.bak here, so put this store's back from a backup of the data dir (keep the other ${store} aside). `;
  return (
    `svc cannot tell which of the two is this store's. If ${store} is the one that came from elsewhere, ` +
    putBack +
    `If ${path.basename(journal)} is the one that came from elsewhere, put this store's back, or move it aside (${store} holds this store's changes up to change ${snapshotSeq}): ${moveAside(journal, '.other')}.`
  );
}

function damagedWayOut(d: DamagedLine, unreadable = `Change ${d.seq} cannot be read.`): string {
  if (d.fileLast <= d.snapshotSeq) {
    return `${path.basename(d.journal.file)} holds only changes db.json already has (it is kept for db.json.bak), so starting without it loses nothing. Move it aside, then start again.${commands([moveAside(d.journal.file)])}`;
  }
  const cut = `truncate -s ${d.offset} ${shellQuote(d.journal.file)}`;
  const newest = d.later.length === 0 && d.lastKnown <= d.seq;
  if (newest && (d.recorded === null || d.recorded < d.seq)) {
    return (
      `It is the last change written, and ${SEQ_FILE} does not record it as acknowledged (a write cut short by a power cut leaves this). ` +
      `Cutting it off loses nothing that was acknowledged; cut it off, then start again.${commands([cut])}`
    );
  }
  // Journal files start right after a snapshot point, so a file db.json partly holds cannot be
  // damaged where db.json has the change; should it be, going on from db.json is still safe.
  const from = Math.max(d.seq, d.snapshotSeq + 1);
  const forget = d.recorded !== null && d.recorded >= from ? [moveAside(path.join(d.dataDir, SEQ_FILE), '.old')] : [];
  const laterNote = d.later.length > 0 || !newest ? ' Every later change was made on top of it, so none can be applied without it.' : '';
  return (
    `${unreadable}${laterNote} The store can go on only from change ${from - 1}, which loses ${changes(from, Math.max(from, d.lastKnown))}. ` +
    `If you have a backup of the data dir, restore this file from it instead. To go on from change ${from - 1}: cut the file before line ${d.line}` +
    (d.later.length > 0 ? ', move every later journal file aside' : '') +
    (forget.length > 0 ? `, and move ${SEQ_FILE} aside (it records that the lost changes were made)` : '') +
    `, then start again.${commands([cut, ...d.later.map((j) => moveAside(j.file)), ...forget])}`
  );
}

/** Changes `from` to `to` are in no file: a journal file that held them is gone (or db.json is older than the journal). */
export function missingChanges(opts: { from: number; to: number; next: JournalRef; later: JournalRef[]; snapshotSeq: number; lastKnown: number; recorded: number | null; dataDir: string; storeFile: string }): CorruptStoreError {
  const { from, to, next } = opts;
  const before = from === opts.snapshotSeq + 1 ? ` ${opts.storeFile} holds changes up to ${opts.snapshotSeq}, and the journal goes on only from change ${next.first}: if db.json was replaced by an older copy, put the newer one back.` : '';
  const forget = opts.recorded !== null && opts.recorded >= from ? [moveAside(path.join(opts.dataDir, SEQ_FILE), '.old')] : [];
  const moved = [next, ...opts.later];
  return new CorruptStoreError(
    next.file,
    `the journal lacks ${changes(from, to)}`,
    undefined,
    `The store's journal lacks ${changes(from, to)}: the journal file that held them is not in ${opts.dataDir} (the next one, ${next.file}, starts at change ${next.first}). ${NOTHING_CHANGED}${before} ` +
      `Put the missing file back (from a backup, or from where it was moved) and start again. ` +
      `Without it the store can go on only from change ${from - 1}, which loses ${changes(from, Math.max(to, opts.lastKnown))}; to do that, move every journal file from ${path.basename(next.file)} on aside` +
      (forget.length > 0 ? ` and ${SEQ_FILE}` : '') +
      `, then start again.${commands([...moved.map((j) => moveAside(j.file)), ...forget])}`,
  );
}

/** db.seq says a change was acknowledged that no file holds: the journal lost its end. */
export function lostEnd(opts: { recorded: number; loaded: number; last: JournalRef | undefined; dataDir: string }): CorruptStoreError {
  const seqFile = path.join(opts.dataDir, SEQ_FILE);
  const where = opts.last
    ? `${opts.last.file} was cut short, or a journal file after it (db.journal.${opts.loaded + 1}) was removed`
    : `the journal file that held them (db.journal.${opts.loaded + 1} or one before it) was removed`;
  return new CorruptStoreError(
    seqFile,
    `changes up to ${opts.recorded} were acknowledged, but the store holds changes only up to ${opts.loaded}`,
    undefined,
    `The store lacks ${changes(opts.loaded + 1, opts.recorded)}: ${seqFile} records that changes up to ${opts.recorded} were acknowledged, ` +
      `but db.json and the journal hold changes only up to ${opts.loaded}, so ${where}. ${NOTHING_CHANGED} ` +
      `Put the missing part back (from a backup, or from where it was moved) and start again. ` +
      `To start without those changes (they are lost), move ${SEQ_FILE} aside, then start again.${commands([moveAside(seqFile, '.old')])}`,
  );
}

/** A journal line whose change is not the next one, inside one file: lines were removed or copied. */
export function outOfOrder(opts: { journal: JournalRef; line: number; seq: number; expected: number }): CorruptStoreError {
  const what = opts.seq < opts.expected ? `change ${opts.seq} appears twice` : `the journal lacks ${changes(opts.expected, opts.seq - 1)}`;
  return new CorruptStoreError(
    opts.journal.file,
    what,
    undefined,
    `The store's journal ${opts.journal.file} is out of order: line ${opts.line} holds change ${opts.seq} where change ${opts.expected} belongs (${what}). ${NOTHING_CHANGED} ` +
      `Lines were removed from the file or copied into it; svc will not guess which changes are real. Restore the file from a backup of the data dir.`,
  );
}

/** db.json and db.json.bak are both gone, and journal files are there: their changes are acknowledged data. */
export function snapshotsMissing(opts: { storeFile: string; journals: JournalRef[] }): CorruptStoreError {
  const { storeFile, journals } = opts;
  const files = journals.length === 1 ? `a journal file with its changes is here (${journals[0].file})` : `${journals.length} journal files with its changes are here (from ${journals[0].file} on)`;
  const head =
    `The store's snapshot ${storeFile} and its copy ${storeFile}.bak are both missing, but ${files}. ` +
    `svc will not start an empty store beside them (it would make a new admin, and its first snapshot would drop them), and has changed no file. `;
  if (journals[0].first === 1) {
    const empty = JSON.stringify({ journal_seq: 0, meta: null, users: [], sessions: [], mcp_instances: [], access_requests: [] });
    return new CorruptStoreError(
      storeFile,
      'missing, and so is its copy',
      undefined,
      `${head}The journal holds every change since the store was created, so the store can be rebuilt from it with nothing lost: put an empty snapshot in place, then start again.` +
        commands([`echo '${empty}' > ${shellQuote(storeFile)}`]),
    );
  }
  return new CorruptStoreError(
    storeFile,
    'missing, and so is its copy',
    undefined,
    `${head}The journal goes back only to change ${journals[0].first}; the changes before it were only in those two files, and nothing here can bring them back. ` +
      `Restore ${storeFile} (or ${storeFile}.bak) from a backup of the data dir and start again: the journal replays every change after it.`,
  );
}
