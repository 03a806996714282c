// The house has floors: no module imports itself back through others, and no folder of src/ (nor of src/trainers/)
// reaches back to a folder that reaches it. Type-only imports count: they are arrows a reader follows too.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const SRC = path.resolve("src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

/** Every relative import and re-export of each file, as the .ts files they name. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, "utf8");
    const targets = [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"(\.[^"]+)"/gms)].map(([, spec]) => path.resolve(path.dirname(file), spec!.replace(/\.js$/, ".ts")));
    graph.set(file, targets.filter((target) => target.startsWith(SRC)));
  }
  return graph;
}

/** The strongly connected parts of more than one node (Tarjan): each is a circle of imports. */
function circles(edges: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of edges.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const part: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      part.push(member);
    } while (member !== node);
    if (part.length > 1) found.push(part.sort());
  };
  for (const node of edges.keys()) if (!index.has(node)) visit(node);
  return found;
}

/** The arrows between the rooms of `floor` (its folders and files), each room named relative to src/. */
function roomArrows(graph: Map<string, string[]>, floor: string): Map<string, Set<string>> {
  const room = (file: string) => {
    const relative = path.relative(floor, file);
    return relative.startsWith("..") ? null : path.relative(SRC, path.join(floor, relative.split(path.sep)[0]!));
  };
  const arrows = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = room(file);
    for (const target of targets) {
      const to = room(target);
      if (from === null || to === null || from === to) continue;
      arrows.set(from, (arrows.get(from) ?? new Set()).add(to));
    }
  }
  return arrows;
}

describe("the import graph", () => {
  const graph = importGraph();

  it("reads the tree (every module found, imports resolved)", () => {
    expect(graph.size).toBeGreaterThan(150);
    expect(graph.get(path.join(SRC, "index.ts"))!.length).toBeGreaterThan(20);
  });

  it("has no circle of modules", () => {
    const files = new Map([...graph].map(([file, targets]) => [file, new Set(targets)]));
    expect(circles(files).map((part) => part.map((file) => path.relative(SRC, file)))).toEqual([]);
  });

  it.each(["", "trainers"])("has no circle among the rooms of src/%s", (floor) => {
    expect(circles(roomArrows(graph, path.join(SRC, floor)))).toEqual([]);
  });

  it("finds a circle where there is one", () => {
    const edges = new Map([["a", new Set(["b"])], ["b", new Set(["c"])], ["c", new Set(["a"])], ["d", new Set(["a"])]]);
    expect(circles(edges)).toEqual([["a", "b", "c"]]);
  });
});
