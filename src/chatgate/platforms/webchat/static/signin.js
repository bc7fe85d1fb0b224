// The sign-in page: a token, or a name and password, posted as JSON; the gateway sets the
// session cookie (HttpOnly: this script never sees it) and the chat page takes over.

const form = document.getElementById("signin-form");
const errorEl = document.getElementById("signin-error");
const submit = document.getElementById("signin-submit");

async function signIn(ev) {
  ev.preventDefault();
  const token = document.getElementById("signin-token").value.trim();
  const name = document.getElementById("signin-name").value.trim();
  const password = document.getElementById("signin-password").value;
  const body = token ? { token } : { name, password };
  if (!token && !(name && password)) {
    errorEl.textContent = "Enter a sign-in token, or a name and a password.";
    return;
  }
  submit.disabled = true;
  errorEl.textContent = "";
  try {
    const res = await fetch("/api/signin", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (res.ok) { location.replace("/"); return; }
    const problem = await res.json().catch(() => ({}));
    errorEl.textContent = problem.message || "Sign-in failed (" + res.status + ").";
  } catch {
    errorEl.textContent = "The gateway cannot be reached; try again.";
  } finally {
    submit.disabled = false;
  }
}

form.addEventListener("submit", signIn);
// Ready: a submit now goes through signIn. The page serves the fields disabled so that Enter
// pressed before this script ran cannot submit the form natively (a GET, the token in the URL).
for (const field of form.querySelectorAll("input, button")) field.disabled = false;
document.getElementById("signin-token").focus();
