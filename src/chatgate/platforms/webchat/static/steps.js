// What the agent did on the way to a reply: its tool calls as steps (name, arguments, outcome).
// The gateway shows a running tool as the draft's last line ("⚙ shell: make test …", then
// "⚙ shell: done"); the page collects those lines per reply and keeps them with the final.

const LINE = /(?:^|\n\n)⚙ ([^\n:]+?)(?:: ([^\n]*?))?( …)?$/;
const OUTCOMES = new Set(["done", "declined", "failed"]);

/** A draft's status line as a step event, or null: ``{name, detail}`` started, ``{name, outcome}`` finished. */
export function statusOf(text) {
  const m = LINE.exec(text || "");
  if (!m) return null;
  const [, name, detail = "", running] = m;
  if (!running && OUTCOMES.has(detail)) return { name, outcome: detail };
  return { name, detail: detail.replace(/ …$/, "") };
}

/** The steps of each reply being written, by the id of the message it answers. */
export class Steps {
  constructor() { this.open = new Map(); }

  seen(replyTo, text) {
    const status = statusOf(text);
    if (!status) return;
    const steps = this.open.get(replyTo) || [];
    this.open.set(replyTo, steps);
    const last = steps[steps.length - 1];
    if (status.outcome) {
      if (last && last.name === status.name && !last.outcome) last.outcome = status.outcome;
      else steps.push({ name: status.name, detail: "", outcome: status.outcome });
    } else if (!(last && last.name === status.name && last.detail === status.detail && !last.outcome)) {
      steps.push({ name: status.name, detail: status.detail });
    }
  }

  take(replyTo) {
    const steps = this.open.get(replyTo);
    this.open.delete(replyTo);
    return steps && steps.length ? steps : null;
  }
}

/** The steps as a collapsed list at the top of the reply. */
export function stepsElement(steps) {
  const box = document.createElement("details");
  box.className = "steps";
  const summary = document.createElement("summary");
  summary.textContent = steps.length === 1 ? "1 step" : steps.length + " steps";
  const list = document.createElement("ol");
  for (const step of steps) {
    const item = document.createElement("li");
    item.className = "step " + (step.outcome || "running");
    const name = document.createElement("strong");
    name.textContent = step.name;
    item.append(name);
    if (step.detail) {
      const args = document.createElement("code");
      args.textContent = step.detail;
      item.append(" ", args);
    }
    const outcome = document.createElement("span");
    outcome.className = "outcome";
    outcome.textContent = " — " + (step.outcome || "no outcome seen");
    item.append(outcome);
    list.append(item);
  }
  box.append(summary, list);
  return box;
}
