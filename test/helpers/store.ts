import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { readStoreFiles } from '../../src/store/journal.js';

/** What a data dir's store holds, as one object (db.json plus the journal replayed), read only. */
export const storedOnDisk = (dataDir: string): Promise<Record<string, any> & { access_requests: any[] }> => readStoreFiles(dataDir) as Promise<Record<string, any> & { access_requests: any[] }>;

/** Every byte of the store's files (the snapshot, its backup and the journal), for "never stored" checks. */
export async function storeFilesText(dataDir: string): Promise<string> {
  const names = (await readdir(dataDir)).filter((n) => n.startsWith('db.'));
  return (await Promise.all(names.map((n) => readFile(path.join(dataDir, n), 'utf8')))).join('\n');
}
