// K informers of @kubernetes/client-node in one process, against
// podmux's Kubernetes API over TLS with a bearer token (scripts/bench,
// line kube_api).  Each is the unmodified informer of
// tests/integration/kube_informer.mjs; one process keeps their cost
// on the bench machine small.  Prints one JSON line per thing seen:
//   {"i":N,"event":"synced"}                  informer N's first list is in
//   {"i":N,"event":"update","message":TEXT}   a pod changed; TEXT its
//                                             status.message
//   {"i":N,"event":"error","message":TEXT}
// Arguments: the directory holding node_modules, the server URL, the
// server's CA, the token, K.
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [dir, server, ca, token, count] = process.argv.slice(2);
const k8s = await import(
    pathToFileURL(path.join(dir, 'node_modules', '@kubernetes', 'client-node', 'dist', 'index.js')).href);

function out(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function informer(i) {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
        clusters: [{ name: 'podmux', server, caFile: ca }],
        users: [{ name: 'agent', token }],
        contexts: [{ name: 'podmux', cluster: 'podmux', user: 'agent' }],
        currentContext: 'podmux',
    });
    const api = kc.makeApiClient(k8s.CoreV1Api);
    const inf = k8s.makeInformer(kc, '/api/v1/pods', () => api.listPodForAllNamespaces());
    inf.on('update', (pod) => out({ i, event: 'update', message: (pod.status && pod.status.message) || '' }));
    inf.on('error', (err) => {
        out({ i, event: 'error', message: String(err && err.message ? err.message : err) });
        setTimeout(() => inf.start().catch(() => {}), 1000);
    });
    return inf.start().then(() => out({ i, event: 'synced' }));
}

await Promise.all(Array.from({ length: Number(count) }, (_, i) => informer(i)));
