// Bundle each widget's TypeScript into one self-contained ES module under torchlens_widgets/static/.
// Invoked by `npm run build` (and so by hatch_build.py on `pip install .`). Everything is bundled:
// the output may not import anything (no CDN, no bare specifiers), and it must stay small.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const STATIC = join(here, "..", "torchlens_widgets", "static");
const BUNDLES = ["stride", "dispatch", "gradgraph", "memory", "dtable", "tgrid", "ptrace", "ranks"];
const MAX_BYTES = 50 * 1024;

// `--lab --core-path DIR`: the JupyterLab extension instead (DIR: jupyterlab's staging folder, which
// names the versions of the packages JupyterLab shares with extensions; hatch_build.py finds it).
const args = process.argv.slice(2);
if (args.includes("--lab")) {
  const at = args.indexOf("--core-path");
  const corePath = at >= 0 ? args[at + 1] : process.env.TLW_JUPYTERLAB_STAGING;
  if (!corePath) throw new Error("--lab needs --core-path <jupyterlab/staging> (python -c 'import jupyterlab, os; print(os.path.dirname(jupyterlab.__file__) + \"/staging\")')");
  await build({
    entryPoints: [join(here, "src", "labext", "index.ts")],
    outfile: join(here, "lib", "labext.js"),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    external: ["@jupyterlab/*", "@lumino/*"], // shared with JupyterLab at run time, never bundled
    logLevel: "warning",
  });
  const builder = join(here, "node_modules", "@jupyterlab", "builder", "lib", "build-labextension.js");
  const run = spawnSync(process.execPath, [builder, "--core-path", corePath, here], { stdio: "inherit" });
  if (run.status !== 0) throw new Error(`@jupyterlab/builder failed (exit ${run.status})`);
  console.log(`built the JupyterLab extension into ${join(STATIC, "..", "labextension")}`);
  process.exit(0);
}

for (const name of BUNDLES) {
  const outfile = join(STATIC, `${name}.js`);
  const result = await build({
    entryPoints: [join(here, "src", name, "index.ts")],
    outfile,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    minify: true,
    legalComments: "none",
    charset: "utf8",
    metafile: true,
    logLevel: "warning",
  });
  const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports);
  if (imports.length) {
    throw new Error(`${name}.js must not import anything, but imports ${imports.map((i) => i.path).join(", ")}`);
  }
  const size = statSync(outfile).size;
  if (size > MAX_BYTES) throw new Error(`${name}.js is ${size} bytes, over the ${MAX_BYTES}-byte budget`);
  console.log(`built ${outfile} (${size} bytes)`);
}
