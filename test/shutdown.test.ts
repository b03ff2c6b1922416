import { readFile } from 'node:fs/promises';
import path from 'node:path';
import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { startTestDaemon, tempDir } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';

it('shuts down gracefully: an in-flight stream finishes, acknowledged writes are on disk, new connections are refused', async () => {
  const upstream = await startUpstream({ chunkDelayMs: 150, chunks: 4 });
  const dataDir = await tempDir();
  const d = await startTestDaemon({ dataDir, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  try {
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url });
    const { clientId, secret } = await registerClient(admin);
    const { scope } = await approvedScope(d, admin, clientId);
    const token = (await authorize(await oidcConfig(d, clientId, secret), admin, scope)).tokens!.access_token;
    const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0 });

    const stream = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }], stream: true });
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody());
    expect(created.status).toBe(201);

    let closing: Promise<void> | undefined;
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      closing ??= d.close(); // SIGTERM does exactly this
    }
    expect(text).toBe('part0 part1 part2 part3 ');
    await closing;

    const onDisk = JSON.parse(await readFile(path.join(dataDir, 'db.json'), 'utf8'));
    expect(onDisk.access_requests.some((r: { id: string }) => r.id === created.body.id)).toBe(true);
    await expect(fetch(`${d.url}/svc/v1/health`)).rejects.toThrow();
  } finally {
    await d.stop();
    await upstream.close();
  }
});
