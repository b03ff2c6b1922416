import { readdir, readFile, realpath, rm } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { VERSION } from '../src/version.js';
import { cleanEnv, REPO, requireFreshDist } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';

// An install from the npm cache takes seconds; one that must fetch from the registry, longer.
vi.setConfig({ testTimeout: 240_000, hookTimeout: 240_000 });

/**
 * What a person gets from `npm pack` and `npm install -g` of the tarball: a working `svc` on the
 * PATH, with its man page, and nothing of the repository but dist/, bin/ and man/.
 */
describe('the npm package, installed globally', () => {
  let root: string;
  let prefix: string;
  let tarball: string;
  let files: string[];

  beforeAll(async () => {
    // `npm test` builds first; packing here skips `prepare` (the same build) so that no other
    // test sees dist/ rewritten under it.
    requireFreshDist();
    root = await tempDir('svc-install-');
    prefix = path.join(root, 'prefix');
    const packed = await execa('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', root], { cwd: REPO, env: cleanEnv() });
    const info = JSON.parse(packed.stdout)[0] as { filename: string; files: { path: string }[] };
    tarball = path.join(root, info.filename);
    files = info.files.map((f) => f.path);
    // From the npm cache when it holds every dependency, else from the registry.
    const install = (mode: string) =>
      execa('npm', ['install', '--global', '--prefix', prefix, tarball, mode, '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: root, env: cleanEnv(), reject: false, timeout: 200_000 });
    let result = await install('--offline');
    if (result.exitCode !== 0) result = await install('--prefer-offline');
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(0);
  });
  afterAll(() => (root ? rm(root, { recursive: true, force: true }) : undefined));

  it('packs dist/, bin/ and the man page, and nothing else of the repository', () => {
    for (const f of ['bin/svc.js', 'man/svc.1', 'dist/cli/main.js', 'dist/daemon.js', 'package.json']) expect(files).toContain(f);
    // npm always adds package.json and the README; everything else comes from package.json's `files`
    const stray = files.filter((f) => !/^(dist|bin|man)\//.test(f) && !['package.json', 'README.md'].includes(f));
    expect(stray).toEqual([]);
    expect(files.some((f) => /\.test\.js$/.test(f))).toBe(false);
  });

  it('puts a working svc on the PATH, with its man page', async () => {
    const bin = path.join(prefix, 'bin');
    const env = cleanEnv({ PATH: `${bin}:${process.env.PATH}` });
    const version = await execa('svc', ['--version'], { env, extendEnv: false });
    expect(version.stdout.trim()).toBe(VERSION);
    const help = await execa('svc', ['--help'], { env, extendEnv: false });
    expect(help.stdout).toMatch(/^Usage: svc /);
    const man = path.join(prefix, 'share', 'man', 'man1', 'svc.1');
    expect(await readFile(man, 'utf8')).toBe(await readFile(path.join(REPO, 'man', 'svc.1'), 'utf8'));
    // the installed package holds what was packed, and its dependencies
    const installed = await realpath(path.join(prefix, 'lib', 'node_modules', 'svc'));
    expect((await readdir(installed)).sort()).toEqual(['README.md', 'bin', 'dist', 'man', 'node_modules', 'package.json']);
    // a user service made from it runs the installed svc, not the clone it was packed from
    const unit = await execa('svc', ['service', 'install', '--dry-run'], { env: cleanEnv({ PATH: env.PATH, SVC_HOME: path.join(root, 'data'), XDG_CONFIG_HOME: path.join(root, 'config') }), extendEnv: false });
    expect(unit.stdout).toContain(`ExecStart=${process.execPath} ${path.join(installed, 'bin', 'svc.js')} serve `);
  });

  it('the installed svc runs the daemon, and its CLI talks to it', async () => {
    const env = cleanEnv({ PATH: `${path.join(prefix, 'bin')}:${process.env.PATH}`, SVC_HOME: path.join(root, 'data'), SVC_KEYCHAIN: 'file' });
    const serve = execa('svc', ['serve', '--port', '0'], { env, extendEnv: false, reject: false, buffer: false, stdin: 'ignore' });
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        serve.stdout!.on('data', (c) => (out += c) && /svc listening on http:\/\/127\.0\.0\.1:\d+/.test(out) && resolve());
        serve.once('exit', (code) => reject(new Error(`svc serve exited ${code}: ${out}`)));
      });
      const status = await execa('svc', ['status', '--json'], { env, extendEnv: false });
      expect(JSON.parse(status.stdout)).toMatchObject({ running: true, logged_in_as: 'admin', daemon_version: VERSION });
    } finally {
      serve.kill('SIGTERM');
      await serve.catch(() => undefined);
    }
  });
});
