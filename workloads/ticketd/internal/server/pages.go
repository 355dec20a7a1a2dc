package server

import (
	"html/template"
	"strings"

	"ctrperf/workloads/ticketd/internal/store"
)

// pageData is what every template gets.
type pageData struct {
	Title    string
	Error    string
	Token    string
	User     store.User
	Project  store.Project
	Projects []store.Project
	Tickets  []store.Ticket
	TicketID int64
	Filler   []string
}

// filler gives the login page the weight of a real one (Redmine's was about
// 6 KB): pages of a few hundred bytes would make the network path look
// cheaper than it is for a web application.
var filler = func() []string {
	var out []string
	for _, s := range []string{
		"Use your company account to sign in. Accounts are created by an administrator.",
		"If you forgot your password, ask an administrator to reset it; passwords are never sent by mail.",
		"Projects are private unless their members made them public.",
		"Tickets track bugs, features and support requests; every change is kept in the history.",
		"The activity view lists the latest changes of all projects you are a member of.",
		"Roadmaps group tickets by target version and show their progress.",
		"Time spent on tickets can be logged and reported per project, member and activity.",
		"Repositories linked to a project show their changesets next to the tickets they reference.",
	} {
		out = append(out, s, strings.Repeat("Keyboard shortcuts: press ? on any page to see them. ", 2))
	}
	return out
}()

const layout = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} - ticketd</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
html{overflow-y:scroll}body{font-family:Verdana,sans-serif;font-size:12px;color:#333;margin:0;padding:0;min-width:900px}
h1,h2,h3,h4{font-family:"Trebuchet MS",Verdana,sans-serif;padding:2px 10px 1px 0;margin:0 0 10px 0}
h1{margin:0;padding:0;font-size:2em}h2{font-size:20px;color:#555}h3{font-size:16px;color:#555}
a{color:#169;text-decoration:none}a:hover{color:#c61a1a;text-decoration:underline}
#top-menu{background:#3e5b76;color:#fff;height:1.8em;font-size:.8em;padding:2px 2px 0 6px}
#top-menu ul{margin:0;padding:0}#top-menu li{float:left;list-style-type:none;margin:0;padding:0;white-space:nowrap}
#top-menu a{color:#fff;margin-right:8px;font-weight:bold}#account{float:right}
#header{min-height:5.3em;margin:0;background-color:#628db6;color:#f8f8f8;padding:4px 8px 20px 6px;position:relative}
#header h1{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
#main-menu{position:absolute;bottom:0;left:6px;margin-right:-500px}
#main-menu li{float:left;list-style-type:none;margin:0;padding:0;white-space:nowrap}
#main-menu li a{display:block;color:#fff;text-decoration:none;font-weight:bold;margin:0;padding:4px 10px 4px 10px}
#main{background-color:#eee}#content{width:75%;background-color:#fff;margin:0;border-right:1px solid #ddd;padding:6px 10px 10px 10px;z-index:10}
#sidebar{float:right;width:22%;position:relative;z-index:9;padding:0;margin:0}
#footer{clear:both;border-top:1px solid #bbb;font-size:.9em;color:#aaa;padding:5px;text-align:center;background:#fff}
table.list{border:1px solid #e4e4e4;border-collapse:collapse;width:100%;margin-bottom:4px}
table.list th{background-color:#eee;padding:4px;white-space:nowrap}table.list td{vertical-align:top;padding-right:10px}
table.list td.id{width:2%;text-align:center}table.list td.subject{text-align:left}table.list td.status{white-space:nowrap}
tr.odd{background-color:#f6f7f8}tr.even{background-color:#fff}tr.priority-high td,tr.priority-urgent td{font-weight:bold}
.box{padding:6px;margin-bottom:10px;background-color:#f6f6f6;color:#505050;line-height:1.5em;border:1px solid #e4e4e4;border-radius:3px}
div.flash{margin-top:8px;padding:4px 4px 4px 30px;border:1px solid;border-radius:3px}
#errorExplanation,div.flash.error{background-color:#ffe3e3;border-color:#d88;color:#880000}
div.flash.notice{background-color:#dfffdf;border-color:#9fcf9f;color:#005f00}
#login-form{margin:5em auto 2em auto;padding:20px;width:340px;border:1px solid #fdbf3b;background-color:#ffebc1;border-radius:4px}
#login-form label{display:block;margin-bottom:5px}#login-form input[type=text],#login-form input[type=password]{border:1px solid #ccc;border-radius:3px;margin-bottom:15px;padding:7px;display:block;width:100%;box-sizing:border-box}
#login-form input#login-submit{margin-top:15px;padding:6px 12px;border:1px solid #888;border-radius:3px;background:#f2f2f2;cursor:pointer}
input,select,textarea,button{vertical-align:middle;margin-top:1px;margin-bottom:1px;font-family:Verdana,sans-serif;font-size:12px}
.tabular p{margin:0;padding:3px 0 3px 180px;min-height:1.8em;clear:left}.tabular label{font-weight:bold;float:left;text-align:right;margin-left:-180px;width:175px}
</style></head>
<body><div id="wrapper"><div id="top-menu"><div id="account"><ul>
{{if .User.ID}}<li>Logged in as <a href="/my/page">{{.User.Login}}</a></li><li><form method="post" action="/logout"><button>Sign out</button></form></li>
{{else}}<li><a href="/login">Sign in</a></li>{{end}}</ul></div>
<ul><li><a href="/">Home</a></li><li><a href="/my/page">My page</a></li><li><a href="/projects">Projects</a></li><li><a href="/help">Help</a></li></ul></div>
<div id="header"><h1>ticketd</h1><div id="main-menu"><ul><li><a href="/my/page">Overview</a></li><li><a href="/activity">Activity</a></li><li><a href="/issues">Issues</a></li><li><a href="/news">News</a></li></ul></div></div>
<div id="main"><div id="content">{{template "content" .}}</div></div>
<div id="footer">Powered by ticketd, the ctrperf web workload &copy; its authors</div></div></body></html>`

var funcs = template.FuncMap{"mod": func(i int) int { return i % 2 }}

func page(content string) *template.Template {
	t := template.Must(template.New("layout").Funcs(funcs).Parse(layout))
	template.Must(t.New("content").Parse(content))
	return t
}

var (
	loginTmpl = page(`{{if .Error}}<div class="flash error" id="flash_error">{{.Error}}</div>{{end}}
<div id="login-form"><form action="/login" method="post">
<input type="hidden" name="authenticity_token" value="{{.Token}}">
<input type="hidden" name="back_url" value="/my/page">
<label for="username">Login</label><input type="text" name="username" id="username" tabindex="1" autofocus>
<label for="password">Password</label><input type="password" name="password" id="password" tabindex="2">
<input type="checkbox" name="autologin" id="autologin" value="1" tabindex="4"><label for="autologin">Stay logged in</label>
<input type="submit" name="login" value="Login" tabindex="5" id="login-submit">
</form></div>
<div class="box">{{range .Filler}}<p>{{.}}</p>{{end}}</div>`)

	myTmpl = page(`<h2>My page</h2><div class="box"><h3>Projects</h3><ul>
{{range .Projects}}<li><a href="/projects/{{.ID}}">{{.Name}}</a> ({{.TicketCount}} tickets)</li>{{end}}</ul></div>`)

	projectTmpl = page(`<h2>{{.Project.Name}}</h2>
<div class="box"><p>{{.Project.Description}}</p><p>{{.Project.TicketCount}} tickets, last change {{.Project.UpdatedAt.Format "2006-01-02 15:04"}}</p></div>
<h3>Latest tickets</h3>
<table class="list issues"><thead><tr><th>#</th><th>Status</th><th>Priority</th><th>Subject</th><th>Author</th><th>Created</th></tr></thead><tbody>
{{range $i, $t := .Tickets}}<tr class="{{if eq (mod $i) 0}}odd{{else}}even{{end}} priority-{{$t.Priority}}"><td class="id"><a href="/tickets/{{$t.ID}}">{{$t.ID}}</a></td>
<td class="status">{{$t.Status}}</td><td>{{$t.Priority}}</td><td class="subject"><a href="/tickets/{{$t.ID}}">{{$t.Subject}}</a><br><small>{{$t.Description}}</small></td>
<td>{{$t.AuthorLogin}}</td><td>{{$t.CreatedAt.Format "2006-01-02 15:04"}}</td></tr>
{{end}}</tbody></table>
<h3>New ticket</h3>
<form action="/projects/{{.Project.ID}}/tickets" method="post" class="tabular" id="new-ticket">
<input type="hidden" name="authenticity_token" value="{{.Token}}">
<p><label for="subject">Subject</label><input type="text" name="subject" id="subject" size="80" maxlength="255"></p>
<p><label for="priority">Priority</label><select name="priority" id="priority"><option>low</option><option selected>normal</option><option>high</option><option>urgent</option></select></p>
<p><label for="description">Description</label><textarea name="description" id="description" cols="60" rows="10"></textarea></p>
<input type="submit" value="Create">
</form>`)

	createdTmpl = page(`<div class="flash notice">Ticket <a href="/tickets/{{.TicketID}}">#{{.TicketID}}</a> created.</div>
<p><a href="/projects/{{.Project.ID}}">Back to the project</a></p>`)

	ticketTmpl = page(`{{range .Tickets}}<h2>#{{.ID}} {{.Subject}}</h2><div class="box"><p>Status: {{.Status}}, priority: {{.Priority}}, by {{.AuthorLogin}} on {{.CreatedAt.Format "2006-01-02 15:04"}}</p>
<p>{{.Description}}</p><p><a href="/projects/{{.ProjectID}}">Back to the project</a></p></div>{{end}}`)
)
