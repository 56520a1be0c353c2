"""The jinja template of the HTML report (:mod:`b2batch.display.html`): one page, its style and its one
small script inline, so that the file opens anywhere with nothing fetched."""

CSS = """
:root { --done: #2e7d32; --failed: #c62828; --queued: #b0bec5; --running: #1565c0; --resubmitted: #ef6c00;
        --unfinished: #9e9e9e; --ink: #212121; --faint: #eceff1; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--ink); margin: 1.5em 2em; max-width: 1300px; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.2em; margin-top: 1.6em;
  border-bottom: 1px solid var(--faint); }
.meta { color: #555; } .meta code { font-size: .95em; }
.status { font-weight: 600; padding: .1em .5em; border-radius: .3em; color: white; }
.status.done { background: var(--done); } .status.failed { background: var(--failed); }
.cards { display: flex; flex-wrap: wrap; gap: .8em; margin: 1em 0; }
.card { border: 1px solid #cfd8dc; border-radius: .4em; padding: .4em .9em; min-width: 7em; }
.card .n { font-size: 1.5em; font-weight: 600; } .card .k { color: #555; font-size: .9em; }
table { border-collapse: collapse; } td, th { padding: .15em .7em; border-bottom: 1px solid var(--faint);
  text-align: right; } td:first-child, th:first-child, td.l, th.l { text-align: left; }
svg text { font: 11px system-ui, sans-serif; fill: var(--ink); }
svg .label { text-anchor: end; } svg .tick { fill: #666; text-anchor: middle; }
svg .grid { stroke: var(--faint); }
.s-queued { fill: var(--queued); } .s-running { fill: var(--running); } .s-done { fill: var(--done); }
.s-failed, .s-not-submitted { fill: var(--failed); } .s-resubmitted { fill: var(--resubmitted); }
.s-unfinished, .s-cancelled, .s-new-requirements { fill: var(--unfinished); }
.bar { fill: var(--running); }
.legend span { display: inline-block; width: .9em; height: .9em; margin: 0 .3em 0 1em; vertical-align: -2px; }
.dists { display: flex; flex-wrap: wrap; gap: 2em; }
.failure { border-left: 4px solid var(--failed); padding: .2em .8em; margin: .8em 0; background: #fff8f8; }
.failure .name { font-weight: 600; } pre { background: #263238; color: #eceff1; padding: .5em .8em;
  overflow-x: auto; font-size: 12px; } .path { font-family: monospace; font-size: .9em; word-break: break-all; }
.none { color: #666; font-style: italic; } td.low { color: var(--failed); font-weight: 600; } .scroll { overflow-x: auto; }
input[type=search] { padding: .2em .4em; width: 24em; }
"""

SCRIPT = """
(function () {
  var box = document.getElementById('filter');
  if (!box) { return; }
  box.addEventListener('input', function () {
    var words = box.value.toLowerCase();
    var items = document.querySelectorAll('.failure');
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var hit = items[i].textContent.toLowerCase().indexOf(words) >= 0;
      items[i].style.display = hit ? '' : 'none';
      shown += hit ? 1 : 0;
    }
    document.getElementById('filter-count').textContent = words ? shown + ' shown' : '';
  });
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>""" + CSS + """</style>
</head>
<body>
<h1>b2batch run of {{ report.started or "?" }}</h1>
<p class="meta"><span class="status {{ status[0] }}">{{ status[1] }}</span>
{% if report.script %} <code>{{ report.script }}{% for a in report.argv or [] %} {{ a }}{% endfor %}</code>{% endif %}
 &middot; {{ report.mode }} &middot; started {{ report.started }}, ended {{ report.ended }}
 &middot; b2batch {{ report.b2batch_version }}{% if source %} &middot; from <span class="path">{{ source }}</span>{% endif %}</p>

<div class="cards" id="headline">
{% for key, value in headline %}
<div class="card"><div class="n">{{ value }}</div><div class="k">{{ key }}</div></div>
{% endfor %}
</div>

<h2>Tasks per family</h2>
{% if families[1] %}
<table id="families"><tr>{% for c in families[0] %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in families[1] %}<tr>{% for cell in row %}<td{% if loop.index == 2 %} class="l"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% else %}<p class="none">No tasks.</p>{% endif %}

<h2>Timeline</h2>
<p class="legend"><span class="s-queued" style="background:var(--queued)"></span>queued
<span style="background:var(--running)"></span>running
<span style="background:var(--done)"></span>done
<span style="background:var(--failed)"></span>failed
<span style="background:var(--resubmitted)"></span>resubmitted
<span style="background:var(--unfinished)"></span>unfinished</p>
{% if timeline %}
<p class="meta">One row per job (queued, then running, for each attempt), and one per pilot or bundle job with
the tasks it ran. Hover for details.</p>
<div class="scroll">{{ timeline }}</div>
{% elif lanes %}
<p class="meta">More than {{ max_rows }} rows: one lane per task family and batch system{% if row_count and row_count <= max_rows // 2 %},
and one per pilot or bundle job ({{ row_count }}){% endif %}, each stretch of time shaded by how many jobs or tasks
ran then (red: some failed). The number after a lane's name is how many it holds.</p>
<div class="scroll">{{ lanes }}</div>
{% else %}<p class="none">No jobs.</p>{% endif %}

<h2>Jobs over time</h2>
{% if over_time %}<div class="scroll">{{ over_time }}</div>
<p class="meta">Jobs queued (grey) and running (blue) at each moment of the run.</p>
{% else %}<p class="none">No jobs.</p>{% endif %}

<h2>Distributions</h2>
<div class="dists">
{% for name, counted, d in distributions %}
<div><h3>{{ name }}</h3>{{ d.chart }}
<p class="meta">{{ d.count }} {{ counted }}{% if d.count %}: median {{ d.median | duration }}, 90% within
{{ d.p90 | duration }}, longest {{ d.max | duration }}{% endif %}</p></div>
{% endfor %}
</div>

<h2>Efficiency per family</h2>
{% if efficiency %}
<table id="efficiency"><tr>{% for c in efficiency[0] %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in efficiency[1] %}<tr>{% for text, mark in row %}<td{% if mark %} class="{{ mark }}"{% endif %}>{{ text }}</td>{% endfor %}</tr>
{% endfor %}</table>
<p class="meta">Used / requested: CPU time / (wall time &times; CPUs requested), peak memory / memory requested
(marked under 50%). The suggested request is 95% of the peaks plus 20%, in the batch system's syntax.</p>
{% else %}<p class="none">This report has no resource figures (made by a b2batch without accounting).</p>{% endif %}

<h2 id="failures-title">Failures ({{ failures.count }})</h2>
{% if failures.count %}
{% if failures.shown | length > 3 %}<p><input type="search" id="filter" placeholder="filter the failures"
 aria-label="filter the failures"> <span id="filter-count"></span></p>{% endif %}
{% for f in failures.shown %}
<div class="failure">
<div class="name">{{ f.name }}</div>
<div>{{ f.job }} on {{ f.system }}{% if f.carrier %}, in {{ f.carrier }}{% endif %}{% if f.node %}, on node {{ f.node }}{% endif %}</div>
{% if f.reason %}<div>{{ f.reason }}</div>{% endif %}
{% for line in f.more.splitlines()[:12] %}<div>{{ line }}</div>{% endfor %}
<div>stdout: <span class="path">{{ f.stdout }}</span></div>
<div>stderr: <span class="path">{{ f.stderr }}</span></div>
{% if f.tail %}<pre>{{ f.tail }}</pre>{% endif %}
</div>
{% endfor %}
{% if failures.rest %}
<p>And {{ failures.rest_count }} more failed jobs, by family and reason{% if failures.rest | length == 50 %}
(the 50 most common){% endif %}; all are in the JSON report:</p>
<table><tr><th>task family</th><th class="l">reason</th><th>jobs</th></tr>
{% for family, reason, n in failures.rest %}<tr><td>{{ family }}</td><td class="l">{{ reason }}</td><td>{{ n }}</td></tr>
{% endfor %}</table>
{% endif %}
{% for o in failures.other %}
<div class="failure"><div class="name">{{ o.task }}</div><div>{{ o.outcome }}: {{ o.reason }}</div></div>
{% endfor %}
{% else %}<p class="none">No task failed.</p>{% endif %}

{% if others.count %}
<h2>Not run or unfinished ({{ others.count }})</h2>
<ul>{% for name, reason in others.shown %}<li>{{ name }}: {{ reason }}</li>{% endfor %}
{% if others.count > others.shown | length %}<li>... and {{ others.count - others.shown | length }} more</li>{% endif %}</ul>
{% endif %}

{% if policies %}
<h2>What the self-healing policies did</h2>
{% for policy, lines, count in policies %}
<h3>{{ policy | replace("_", " ") }} ({{ count }})</h3>
<ul>{% for line in lines %}<li>{{ line }}</li>{% endfor %}{% if count > lines | length %}<li>... and {{ count - lines | length }} more</li>{% endif %}</ul>
{% endfor %}
{% endif %}

{% if scheduler_calls %}
<h2>Scheduler commands</h2>
<p>{% for program, n in scheduler_calls.items() %}{{ n }} {{ program }}{% if not loop.last %}, {% endif %}{% endfor %}</p>
{% endif %}
<script>""" + SCRIPT + """</script>
</body>
</html>
"""
