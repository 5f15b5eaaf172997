package discoveryeval

import (
	"strings"

	"github.com/toolplane/toolplane"
)

// special is one hand-written tool: the hard cases a template does not
// produce (names that say nothing, one-word descriptions, legacy tools
// kept callable while deprecated).
type special struct {
	name, title, desc string
	effect            string
	params            string
	tags              []string
	hints             []string
	// replacement, when set, deprecates the tool in favour of this one.
	replacement string
}

// specials answers the hand-written tools, and the older, deprecated
// versions of some templated tools (replaced by their own newer major).
func specials() []Tool {
	var out []Tool
	for _, s := range []special{
		// Uninformative names, informative descriptions.
		{name: "util.run_job_v2", effect: "write", desc: "Runs a job on the batch cluster. Used by the data team to rerun the nightly customer export to the warehouse.",
			params: "*job:string:Job name.|args:object:Job arguments.", tags: []string{"internal"}},
		{name: "ops.exec", effect: "write", desc: "Execute an approved runbook step against production hosts.",
			params: "*runbook:string:Runbook ID.|*step:integer:Step number.|hosts:array:Target hosts.", tags: []string{"ops"}},
		{name: "misc.handler_7", effect: "write", desc: "Regenerates the sitemap.xml of the marketing website and pings search engines.", tags: []string{"web"}},
		{name: "tools.do_it", effect: "send", desc: "Sends the weekly KPI digest to leadership.", params: "week:date:Week to report.", tags: []string{"reporting"}},
		{name: "internal.proc_a", effect: "write", desc: "Purges the CDN cache for a URL path so the next request fetches from origin.",
			params: "*path:string:URL path or prefix.", tags: []string{"cdn"}},
		{name: "svc.task", effect: "read", desc: "Compute sales tax for an amount shipped to a postal code.",
			params: "*amount:number:Amount.|*postal_code:string:Destination ZIP or postal code.|country:string:Country.", tags: []string{"tax"}},
		{name: "helper.cmd", effect: "read", desc: "Convert an amount between currencies at today's exchange rate.",
			params: "*amount:number:Amount.|*from:string:ISO currency.|*to:string:ISO currency.", tags: []string{"fx"}},
		{name: "acme.tool1", effect: "read", desc: "Translate text into another language.", params: "*text:string:Text.|*target_language:string:Language code."},
		{name: "proc.j44", effect: "write", desc: "Anonymise a former customer's personal data across systems (GDPR erasure request).",
			params: "*customer_id:string:Customer.", tags: []string{"privacy"}},
		{name: "batch.x", effect: "write", desc: "Bulk import records from a CSV file.", params: "*file_id:string:CSV file.|*object:string:Record type."},
		// Terse descriptions.
		{name: "legacy.fn_export", effect: "read", desc: "Export."},
		{name: "data.sync", effect: "write", desc: "Sync."},
		{name: "crm.merge", effect: "write", desc: "Merge dupes.", params: "*ids:array:IDs."},
		{name: "hr.lookup", effect: "read", desc: "Employee lookup.", params: "*q:string:Query."},
		{name: "fin.fx", effect: "read", desc: "FX rates.", params: "base:string:Base."},
		{name: "it.pw", effect: "write", desc: "PW reset.", params: "*u:string:User."},
		// Small domains the templates do not cover.
		{name: "cloudflare.create_dns_record", title: "Create a DNS record", effect: "write",
			desc: "Create a DNS record (A, AAAA, CNAME, TXT, MX) in a Cloudflare zone.", params: "*zone_id:string:Zone.|*type:string:Record type.|*name:string:Host name.|*content:string:Value.|ttl:integer:TTL.", tags: []string{"dns", "cloudflare"}},
		{name: "cloudflare.purge_cache", effect: "write", desc: "Purge cached files from Cloudflare by URL or tag.", params: "files:array:URLs.|tags:array:Cache tags.", tags: []string{"cdn", "cloudflare"}},
		{name: "route53.change_record_sets", effect: "write", desc: "Create, update or delete resource record sets in a Route 53 hosted zone.",
			params: "*hosted_zone_id:string:Zone.|*changes:array:Changes.", tags: []string{"dns", "aws"}},
		{name: "launchdarkly.toggle_flag", title: "Turn a feature flag on or off", effect: "write",
			desc: "Turn a LaunchDarkly feature flag on or off in an environment.", params: "*flag_key:string:Flag.|*environment:string:Environment.|*on:boolean:On or off.",
			tags: []string{"feature-flags"}, hints: []string{"kill switch", "rollout"}},
		{name: "launchdarkly.update_rollout", effect: "write", desc: "Set the percentage of users served each variation of a LaunchDarkly flag.",
			params: "*flag_key:string:Flag.|*environment:string:Environment.|*weights:object:Variation weights.", tags: []string{"feature-flags"}},
		{name: "deepl.translate_text", title: "Translate text", effect: "read", desc: "Translate text with DeepL into a target language, keeping formatting.",
			params: "*text:array:Texts.|*target_lang:string:Target language.|source_lang:string:Source language.", tags: []string{"translation"}},
		{name: "openexchange.get_rates", effect: "read", desc: "Latest foreign exchange rates for a base currency from Open Exchange Rates.",
			params: "base:string:Base currency.|symbols:array:Currencies.", tags: []string{"fx"}},
		{name: "avalara.calculate_tax", title: "Calculate sales tax", effect: "read", desc: "Calculate sales and use tax for a transaction's lines and addresses with Avalara AvaTax.",
			params: "*lines:array:Lines.|*ship_to:object:Destination.|ship_from:object:Origin.", tags: []string{"tax"}},
		{name: "greenhouse.list_candidates", effect: "read", desc: "List Greenhouse job candidates with their current interview stage.",
			params: "job_id:string:Job.|stage:string:Stage.", tags: []string{"recruiting", "hr"}},
		{name: "greenhouse.schedule_interview", effect: "write", desc: "Schedule a Greenhouse interview for a candidate with interviewers and a time.",
			params: "*application_id:string:Application.|*interviewers:array:Interviewers.|*start:datetime:Start.", tags: []string{"recruiting", "hr"}},
		{name: "greenhouse.create_offer", effect: "write", desc: "Create a Greenhouse offer for an application with salary and start date.",
			params: "*application_id:string:Application.|*salary:number:Salary.|start_date:date:Start.", tags: []string{"recruiting", "hr"}},
		{name: "gusto.run_payroll", title: "Run payroll", effect: "write", desc: "Calculate and submit a Gusto payroll for a pay period.",
			params: "*pay_period_start:date:Start.|*pay_period_end:date:End.", tags: []string{"payroll", "hr"}, hints: []string{"pay employees", "wages"}},
		{name: "gusto.get_pay_stub", effect: "read", desc: "Get an employee's Gusto pay stub for a pay date.", params: "*employee_id:string:Employee.|*pay_date:date:Pay date.", tags: []string{"payroll", "hr"}},
		{name: "statuspage.create_incident", effect: "send", desc: "Post an incident to the public Statuspage with status and affected components.",
			params: "*name:string:Title.|*status:string:investigating, identified, monitoring or resolved.|components:array:Components.|body:string:Update.", tags: []string{"monitoring", "status"}},
		{name: "sentry.list_issues", effect: "read", desc: "List Sentry error issues for a project, sorted by frequency or recency.",
			params: "*project:string:Project.|query:string:Search.|sort:string:freq or date.", tags: []string{"monitoring", "errors"}},
		{name: "sentry.resolve_issue", effect: "write", desc: "Mark a Sentry issue resolved, optionally in the next release.", params: "*issue_id:string:Issue.|in_next_release:boolean:Resolve in next release.", tags: []string{"monitoring", "errors"}},
		{name: "k8s.scale_deployment", title: "Scale a deployment", effect: "write", desc: "Set the replica count of a Kubernetes deployment.",
			params: "*namespace:string:Namespace.|*deployment:string:Deployment.|*replicas:integer:Replicas.", tags: []string{"kubernetes", "compute"}},
		{name: "k8s.rollout_restart", effect: "write", desc: "Restart a Kubernetes deployment's pods one by one.",
			params: "*namespace:string:Namespace.|*deployment:string:Deployment.", tags: []string{"kubernetes", "compute"}},
		{name: "k8s.get_pod_logs", effect: "read", desc: "Get the logs of a Kubernetes pod's container.", params: "*namespace:string:Namespace.|*pod:string:Pod.|container:string:Container.|tail_lines:integer:Last lines.", tags: []string{"kubernetes"}},
		// Legacy tools, deprecated in favour of another tool.
		{name: "payments.create_refund", effect: "write", desc: "Refund a payment to the customer. Legacy refunds endpoint of the in-house payments service.",
			params: "*payment_id:string:Payment.|amount:integer:Amount.", tags: []string{"payments", "refunds"}, replacement: "stripe.refund_charge"},
		{name: "notify.send_email", effect: "send", desc: "Send an email notification to a customer from a template.",
			params: "*to:string:Recipient.|*template:string:Template.|vars:object:Variables.", tags: []string{"email"}, replacement: "sendgrid.send_template_email"},
		{name: "crm.add_contact", effect: "write", desc: "Add a contact to the CRM.", params: "*email:string:Email.|name:string:Name.", tags: []string{"crm"}, replacement: "salesforce.create_contact@^1.0.0"},
		{name: "tickets.open_ticket", effect: "write", desc: "Open a support ticket for a customer issue.", params: "*subject:string:Subject.|*body:string:Body.", tags: []string{"support"}, replacement: "zendesk.create_ticket"},
		{name: "jira.create_ticket", effect: "write", desc: "Create a Jira ticket.", params: "*project:string:Project.|*summary:string:Summary.", tags: []string{"projects", "jira"}, replacement: "jira.create_issue"},
		{name: "hr.request_pto", effect: "write", desc: "Request paid time off (PTO) for an employee.", params: "*employee:string:Employee.|*from:date:From.|*to:date:To.", tags: []string{"hr"}, replacement: "workday.request_time_off"},
		{name: "ec2.run_instances", effect: "write", desc: "Run EC2 instances from an AMI.", params: "*ami:string:AMI.|*instance_type:string:Type.|count:integer:Count.", tags: []string{"compute", "ec2"}, replacement: "ec2.launch_instance"},
		{name: "storage.put_file", effect: "write", desc: "Store a file in object storage.", params: "*path:string:Path.|*content:string:Content.", tags: []string{"storage"}, replacement: "s3.upload_object"},
		{name: "shop.cancel_order", effect: "write", desc: "Cancel a customer order in the online shop and refund it.", params: "*order:string:Order.", tags: []string{"commerce"}, replacement: "shopify.cancel_order"},
		{name: "alerts.page_oncall", effect: "send", desc: "Page the on-call engineer about an incident.", params: "*service:string:Service.|*message:string:Message.", tags: []string{"monitoring"}, replacement: "pagerduty.trigger_incident"},
	} {
		d := definition(s.name, "1.0.0", s.desc, effectOf(s.effect), s.params)
		d.Title, d.Tags, d.SearchHints = s.title, s.tags, s.hints
		ns, _, _ := strings.Cut(s.name, ".")
		d.Owner = ns + "-team"
		t := Tool{Def: d, Domain: domainOf(s.tags, ns)}
		if s.replacement != "" {
			t.Deprecated, t.Replacement = true, s.replacement
		}
		out = append(out, t)
	}
	return out
}

// superseded are templated tools that have an older major version kept
// callable while deprecated, replaced by the newer major (the templated
// one, published as 2.0.0).
var superseded = map[string]string{
	"slack.post_message":     "Post a message to a Slack channel (API v1).",
	"stripe.refund_charge":   "Create a refund for a Stripe charge (legacy API version).",
	"github.create_issue":    "Create a GitHub issue (REST v3).",
	"zendesk.create_ticket":  "Create a Zendesk ticket (API v1).",
	"gcal.create_event":      "Create a Google Calendar event (v2 API).",
	"okta.deactivate_user":   "Deactivate an Okta user (classic engine).",
	"shopify.cancel_order":   "Cancel a Shopify order (REST Admin API 2022-01).",
	"hubspot.create_contact": "Create a HubSpot contact (v1 contacts API).",
}

func effectOf(s string) toolplane.Effect {
	switch s {
	case "read":
		return R
	case "send":
		return S
	}
	return W
}

func domainOf(tags []string, ns string) string {
	if len(tags) > 0 {
		return tags[0]
	}
	return ns
}
