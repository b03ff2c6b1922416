import { readFile } from 'node:fs/promises';
import type { Logger } from '../../log.js';
import { writeFileDurably } from '../../store/durable-file.js';
import { bootId } from './proc.js';

/** One process group svc started: enough to find it again after svc was killed, and to tell it from a later process given the same pid. */
export interface RecordedChild {
  pid: number;
  /** the group the child leads (its pid: each child starts a session of its own) */
  pgid: number;
  /** the leader's start time in clock ticks after boot (/proc/<pid>/stat), null where there is no /proc */
  start: number | null;
  instance: string;
  at: string;
}

interface RecordFile {
  version: 1;
  boot_id: string | null;
  children: RecordedChild[];
}

/**
 * The file of the command servers svc has running (`<dataDir>/command-children.json`), written
 * durably each time one starts or ends, so that the next start can end what a killed svc left.
 * Writes are queued one after another; changes made while one is under way go in the next.
 */
export class ChildRecord {
  private readonly children = new Map<number, RecordedChild>();
  private version = 0;
  private written = 0;
  private writing: Promise<void> | null = null;

  constructor(private readonly file: string) {}

  add(child: RecordedChild): Promise<void> {
    this.children.set(child.pid, child);
    return this.save();
  }

  remove(pid: number): Promise<void> {
    if (!this.children.delete(pid)) return Promise.resolve();
    return this.save();
  }

  /** Writes what runs now (nothing, at the first start after reaping). */
  save(): Promise<void> {
    const want = ++this.version;
    return this.saveUpTo(want);
  }

  /** Resolves once every change made so far is written (or its write failed). */
  async flushed(): Promise<void> {
    await this.saveUpTo(this.version).catch(() => undefined);
  }

  private async saveUpTo(want: number): Promise<void> {
    while (this.written < want) {
      this.writing ??= this.writeNow().finally(() => {
        this.writing = null;
      });
      await this.writing;
    }
  }

  private async writeNow(): Promise<void> {
    const version = this.version;
    const body: RecordFile = { version: 1, boot_id: bootId(), children: [...this.children.values()] };
    await writeFileDurably(this.file, `${JSON.stringify(body, null, 1)}\n`);
    this.written = Math.max(this.written, version);
  }
}

/**
 * The groups a record file names, for the boot that wrote it; none when the file is missing, was
 * written before the machine last started (nothing of it can run), or is unreadable (said in the log).
 */
export async function readRecord(file: string, logger: Logger): Promise<RecordedChild[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') logger.warn({ file, err: (err as Error).message }, 'cannot read the record of command servers');
    return [];
  }
  const parsed = parseRecord(text);
  if (!parsed) {
    logger.warn({ file }, 'the record of command servers is damaged; nothing in it is ended');
    return [];
  }
  const boot = bootId();
  return boot !== null && parsed.boot_id === boot ? parsed.children : [];
}

function parseRecord(text: string): RecordFile | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const v = value as Partial<RecordFile> | null;
  if (!v || v.version !== 1 || !Array.isArray(v.children)) return null;
  const children = v.children.filter(isRecordedChild);
  return { version: 1, boot_id: typeof v.boot_id === 'string' ? v.boot_id : null, children };
}

const positiveInt = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n > 1;

function isRecordedChild(c: unknown): c is RecordedChild {
  const r = c as Partial<RecordedChild> | null;
  return !!r && positiveInt(r.pid) && positiveInt(r.pgid) && (r.start === null || (typeof r.start === 'number' && r.start >= 0)) && typeof r.instance === 'string';
}
