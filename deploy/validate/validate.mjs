// Validates deploy/ with npm-packaged parsers and schemas. Run by
// scripts/validate-deploy.sh:
//
//   node deploy/validate/validate.mjs MODULES_DIR DEPLOY_DIR DASHBOARD_RULES_OUT
//
// MODULES_DIR is where `npm ci` installed package.json's dependencies (the
// script keeps them under .tools/, out of the repository). It checks:
//   - every document in DEPLOY_DIR/k8s/*.yaml whose kind has a published
//     schema (core Kubernetes kinds from kubernetes-models, PodMonitor and
//     PrometheusRule from @kubernetes-models/prometheus-operator) against it;
//     the others (Strimzi, Flink operator) are listed as left to go test;
//   - DEPLOY_DIR/Dockerfile with the dockerfile-utils linter (errors and
//     warnings both fail);
//   - and writes every Grafana panel expression to DASHBOARD_RULES_OUT as a
//     Prometheus rule file, for `promtool check rules` to parse the PromQL.
// Exits 1 after printing every problem found, 0 when there are none.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [modulesDir, deployDir, rulesOut] = process.argv.slice(2);
if (!modulesDir || !deployDir || !rulesOut) {
  console.error("usage: node validate.mjs MODULES_DIR DEPLOY_DIR DASHBOARD_RULES_OUT");
  process.exit(2);
}
const require = createRequire(path.resolve(modulesDir, "node_modules") + "/");
const YAML = require("yaml");

let failures = 0;
function fail(msg) {
  failures++;
  console.error("FAIL " + msg);
}

// Module path of the kubernetes-models class for apiVersion/kind, or null.
function modelPath(apiVersion, kind) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  }
  return `kubernetes-models/${apiVersion}/${kind}`;
}

function validateKubernetes() {
  const dir = path.join(deployDir, "k8s");
  let checked = 0;
  const skipped = new Set();
  for (const name of fs.readdirSync(dir).filter((n) => /\.ya?ml$/.test(n)).sort()) {
    const file = path.join(dir, name);
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"), { uniqueKeys: true });
    docs.forEach((doc, i) => {
      const where = `${file} document ${i + 1}`;
      if (doc.errors.length > 0) {
        fail(`${where}: ${doc.errors.map((e) => e.message).join("; ")}`);
        return;
      }
      const obj = doc.toJS();
      if (obj === null || typeof obj !== "object") return;
      const { apiVersion, kind } = obj;
      const id = `${where} (${kind} ${obj.metadata?.name})`;
      const mod = modelPath(String(apiVersion), String(kind));
      // A group/version the packages cover must have the kind: a missing one
      // is a typo or a kind that does not exist, not a custom resource.
      const groupDir = path.join(modulesDir, "node_modules", path.dirname(mod));
      if (!fs.existsSync(groupDir)) {
        skipped.add(`${apiVersion} ${kind}`);
        return;
      }
      let Model;
      try {
        Model = require(mod)[kind];
      } catch (e) {
        fail(`${id}: no kind ${kind} in ${apiVersion} (${e.code})`);
        return;
      }
      if (typeof Model !== "function") {
        fail(`${id}: no kind ${kind} in ${apiVersion}`);
        return;
      }
      try {
        new Model(obj).validate();
        checked++;
        console.log(`ok   ${id}: schema ${apiVersion} ${kind}`);
      } catch (e) {
        fail(`${id}: ${e.message}`);
      }
    });
  }
  if (checked === 0) fail(`${dir}: no manifest was checked against a schema`);
  for (const s of [...skipped].sort()) {
    console.log(`note no published schema for ${s}: structural checks in go test ./deploy`);
  }
}

function lintDockerfile() {
  const { validate } = require("dockerfile-utils");
  const file = path.join(deployDir, "Dockerfile");
  const text = fs.readFileSync(file, "utf8");
  const lines = text.split("\n");
  const diags = validate(text);
  for (const d of diags) {
    const line = d.range.start.line + 1;
    const level = d.severity === 1 ? "error" : d.severity === 2 ? "warning" : "info";
    const msg = `${file}:${line}: ${level}: ${d.message} (${lines[line - 1]?.trim()})`;
    if (d.severity <= 2) fail(msg);
    else console.log("note " + msg);
  }
  const froms = lines.filter((l) => /^FROM\s/i.test(l)).length;
  if (froms === 0) fail(`${file}: no FROM instruction`);
  if (diags.filter((d) => d.severity <= 2).length === 0) {
    console.log(`ok   ${file}: ${froms} stages, no lint errors or warnings`);
  }
}

// Grafana variables a Prometheus datasource expands before sending a query.
const grafanaVars = [
  [/\$__rate_interval/g, "5m"],
  [/\$__interval/g, "1m"],
  [/\$__range/g, "1h"],
];

function dashboardRules() {
  const dir = path.join(deployDir, "grafana");
  const rules = [];
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith(".json")).sort()) {
    const file = path.join(dir, name);
    const dash = JSON.parse(fs.readFileSync(file, "utf8"));
    const walk = (panels) => {
      for (const p of panels ?? []) {
        walk(p.panels);
        for (const t of p.targets ?? []) {
          if (typeof t.expr !== "string" || t.expr.trim() === "") {
            fail(`${file}: panel ${p.id} "${p.title}" target ${t.refId}: no expr`);
            continue;
          }
          let expr = t.expr;
          for (const [re, v] of grafanaVars) expr = expr.replace(re, v);
          if (expr.includes("$")) {
            fail(`${file}: panel ${p.id} target ${t.refId}: unknown variable in ${t.expr}`);
            continue;
          }
          const base = name.replace(/\.json$/, "").replace(/[^a-zA-Z0-9_]/g, "_");
          rules.push({ record: `dashboard:${base}_panel${p.id}_${t.refId}`, expr });
        }
      }
    };
    walk(dash.panels);
  }
  if (rules.length === 0) fail(`${dir}: no panel expressions found`);
  fs.writeFileSync(rulesOut, YAML.stringify({ groups: [{ name: "dashboard-exprs", rules }] }));
  console.log(`ok   ${rules.length} dashboard expressions written to ${rulesOut} for promtool`);
}

validateKubernetes();
lintDockerfile();
dashboardRules();
if (failures > 0) {
  console.error(`${failures} problem(s)`);
  process.exit(1);
}
