import path from 'node:path';
import { CorruptStoreError, lineDigest, nodeFs, RUN, shellQuote, type StoreFs, writeFileDurably } from './durable-file.js';

/**
 * `db.seq`: the number of the last acknowledged change, so that a start can tell a journal that
 * lost its end (its last file deleted, or cut at a line boundary: every line left checks out)
 * from one that is whole. It holds no data.
 *
 * It must not cost the write path a second fsync, so it is kept like this:
 * - created (or replaced) durably (temporary file, fsync, rename) whenever a journal file is
 *   started, and at a clean stop;
 * - rewritten in place after each acknowledged append, with no fsync. The line has a fixed width,
 *   so the file never changes size: after a power cut its page holds the old number or the new
 *   one, both no higher than what the journal made durable (it is written only after the append's
 *   fdatasync). A killed process leaves it exact (the page cache survives the process).
 * So after a kill it is exact; after a power cut it may lag behind, and then a loss of the
 * changes after it goes unnoticed. Removed along with the journal files, nothing is noticed.
 */
export const SEQ_FILE = 'db.seq';
const WIDTH = 40;

export function seqLine(seq: number): string {
  const json = JSON.stringify({ last_seq: seq });
  return `${json.padEnd(WIDTH)}\t${lineDigest(json)}\n`;
}

/** The number db.seq records; null when there is none (a store an older svc wrote, or one never written). */
export async function readSeqFile(dataDir: string, fs: StoreFs = nodeFs): Promise<number | null> {
  const file = path.join(dataDir, SEQ_FILE);
  let text: string;
  try {
    text = (await fs.readFile(file)).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const [padded, check] = text.replace(/\n$/, '').split('\t');
  const json = padded?.trimEnd() ?? '';
  let seq: unknown;
  try {
    seq = lineDigest(json) === check ? (JSON.parse(json) as { last_seq?: unknown }).last_seq : undefined;
  } catch {
    seq = undefined;
  }
  if (typeof seq === 'number' && Number.isInteger(seq) && seq >= 0) return seq;
  throw new CorruptStoreError(
    file,
    'it does not check out',
    undefined,
    `The store's record of its last change ${file} is damaged (it does not check out). svc will not start, and has changed no file. ` +
      `It holds no data, only the number of the last acknowledged change, which lets svc notice a journal file that was removed or cut short. ` +
      `If no journal file was removed, move it aside, then start again (svc writes a new one).${RUN}mv ${shellQuote(file)} ${shellQuote(`${file}.damaged`)}`,
  );
}

/** Replaces db.seq whole and durably: when a journal file is started, and at a clean stop. */
export function writeSeqFileDurably(dataDir: string, seq: number, fs: StoreFs = nodeFs): Promise<void> {
  return writeFileDurably(path.join(dataDir, SEQ_FILE), seqLine(seq), 0o600, fs);
}

/**
 * Rewrites db.seq in place, without fsync, after an acknowledged append. Failing here costs only
 * how much a later start can check, never the write, so errors are dropped (the write is already
 * durable, and answering it as failed would be false).
 */
export async function bumpSeqFile(dataDir: string, seq: number, fs: StoreFs = nodeFs): Promise<void> {
  const handle = await fs.open(path.join(dataDir, SEQ_FILE), 'r+').catch(() => null);
  if (!handle) return;
  try {
    await handle.write(seqLine(seq), 0, 'utf8');
  } catch {
    /* see above */
  } finally {
    await handle.close().catch(() => undefined);
  }
}
